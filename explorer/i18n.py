"""Every word Attention Explorer shows, in English (the default) and Korean: one catalogue.

    t("layer", "ko")                       -> "레이어"
    t("stage.softmax.title", "ko")         -> a stage's title (its explanation: "stage.softmax.explain")
    fig_labels("ko")["query"]              -> "쿼리"  (the "fig." words, as the views read them)

Nothing else in the project holds words in two languages: the app, the views, the tables, the
exporter and the export controls all read this table. ``tests/test_i18n.py`` fails when a key has
only one language, when a key is never used, or when a figure or table built in Korean carries a
word of this catalogue in English.
"""
from __future__ import annotations

LANGS = ("en", "ko")
LANG_NAMES = {"en": "English", "ko": "한국어"}

WORDS: dict[str, dict[str, str]] = {
    # --- the page ----------------------------------------------------------------------------------
    "app_title": {
        "en": "Attention Explorer",
        "ko": "어텐션 탐색기"},
    "tagline": {
        "en": "Every stage of attention, computed live from hook points inside the model.",
        "ko": "모델 안의 훅 지점에서 실시간으로 계산한, 어텐션의 모든 단계."},
    "language": {
        "en": "Language",
        "ko": "언어"},
    "model": {
        "en": "Model",
        "ko": "모델"},
    "text": {
        "en": "Sentences (one per line)",
        "ko": "문장 (한 줄에 한 문장)"},
    "text_help": {
        "en": "Each line is one sentence; several lines form a padded batch. Limits: {n} sentences, "
              "{c} characters and {t} tokens per sentence.",
        "ko": "한 줄이 한 문장이며, 여러 줄은 패딩된 배치가 됩니다. 한도: 문장 {n}개, 문장마다 {c}자·토큰 {t}개."},
    "example": {
        "en": "Load an example",
        "ko": "예문 불러오기"},
    "sentence": {
        "en": "Sentence of the batch",
        "ko": "배치에서 볼 문장"},
    "block": {
        "en": "Attention block",
        "ko": "어텐션 블록"},
    "layer": {
        "en": "Layer",
        "ko": "층"},
    "head": {
        "en": "Head",
        "ko": "헤드"},
    "only_one": {
        "en": "{what}: 0 (the model has only one)",
        "ko": "{what}: 0 (모델에 하나뿐)"},
    "query_token": {
        "en": "Query token (row i)",
        "ko": "쿼리 토큰 (행 i)"},
    "key_token": {
        "en": "Key token (column j)",
        "ko": "키 토큰 (열 j)"},
    "pe_base": {
        "en": "Base n",
        "ko": "밑 n"},
    "pe_d_model": {
        "en": "d_model",
        "ko": "d_model"},
    "pe_positions": {
        "en": "Positions",
        "ko": "위치 개수"},
    "pe_dims": {
        "en": "Dimensions to draw",
        "ko": "그릴 차원"},
    "pe_controls": {
        "en": "Try other settings (for comparing, e.g. n = 10000 with n = 100)",
        "ko": "다른 설정으로 그려 보기 (예: n = 10000과 n = 100 비교)"},
    "pe_model_note": {
        "en": "Above: the encoding the model actually added (n = {n}, d_model = {d}).",
        "ko": "위: 모델이 실제로 더한 인코딩 (n = {n}, d_model = {d})."},
    "section_tokens": {
        "en": "Tokens",
        "ko": "토큰"},
    "section_position": {
        "en": "Position",
        "ko": "위치"},
    "section_qkv": {
        "en": "Q · K · V",
        "ko": "Q · K · V"},
    "section_scores": {
        "en": "Scores & masks",
        "ko": "점수와 마스크"},
    "section_output": {
        "en": "Output",
        "ko": "출력"},
    "section_cell": {
        "en": "One cell",
        "ko": "한 칸"},
    "section_overview": {
        "en": "All heads",
        "ko": "모든 헤드"},
    "section_all": {
        "en": "Everything",
        "ko": "전체"},
    "view": {
        "en": "View",
        "ko": "보기"},
    "downloads": {
        "en": "Download (PNG · SVG · PDF · CSV)",
        "ko": "내려받기 (PNG · SVG · PDF · CSV)"},
    "table": {
        "en": "Numbers (table)",
        "ko": "숫자 (표)"},
    "csv": {
        "en": "Download CSV",
        "ko": "CSV 다운로드"},
    "input": {
        "en": "input",
        "ko": "입력"},
    "output": {
        "en": "generated",
        "ko": "생성 결과"},
    "generated_title": {
        "en": "What the model wrote (task: {task})",
        "ko": "모델이 쓴 것 (과제: {task})"},
    "generated_empty": {
        "en": "(nothing: the model stopped at once)",
        "ko": "(없음: 바로 멈췄습니다)"},
    "current": {
        "en": "Showing sentence {i}",
        "ko": "{i}번 문장을 보는 중"},
    "empty": {
        "en": "Type a sentence in the sidebar to begin — for example `hello world` or `안녕하세요`. Each "
              "line is one sentence.",
        "ko": "왼쪽에 문장을 입력하면 시작합니다 — 예: `hello world` 또는 `안녕하세요`. 한 줄이 한 문장입니다."},
    "too_many": {
        "en": "Only the first {n} sentences are used ({m} were given).",
        "ko": "처음 {n}개 문장만 사용합니다 ({m}개 입력됨)."},
    "too_long": {
        "en": "Sentence {i} was cut to {n} characters.",
        "ko": "{i}번 문장을 {n}자로 잘랐습니다."},
    "too_many_tokens": {
        "en": "Sentence {i} was cut to {n} tokens.",
        "ko": "{i}번 문장을 토큰 {n}개로 잘랐습니다."},
    "bad_param": {
        "en": "Ignored the link's `{name}={value}`: {why}",
        "ko": "링크의 `{name}={value}` 값을 무시했습니다: {why}"},
    "clipped_param": {
        "en": "The link's `{name}={value}` is out of range; using {used}.",
        "ko": "링크의 `{name}={value}` 값이 범위를 벗어나 {used}(으)로 바꿨습니다."},
    "why_model": {
        "en": "unknown model (choose one of {choices})",
        "ko": "알 수 없는 모델 ({choices} 중 하나)"},
    "why_int": {
        "en": "not a whole number",
        "ko": "정수가 아닙니다"},
    "why_choice": {
        "en": "choose one of {choices}",
        "ko": "{choices} 중 하나를 고르세요"},
    "weights_missing": {
        "en": "The trained weights for **{name}** are not available: {error}",
        "ko": "**{name}**의 학습된 가중치를 쓸 수 없습니다: {error}"},
    "fallback": {
        "en": "Showing the untrained seed Transformer (random weights) meanwhile: every stage works, "
              "but the patterns are not meaningful yet.",
        "ko": "대신 학습하지 않은 seed 트랜스포머(무작위 가중치)를 보여 줍니다: 모든 단계는 동작하지만 패턴에는 아직 의미가 없습니다."},
    "model_error": {
        "en": "Model **{name}** could not be loaded: {error}",
        "ko": "**{name}** 모델을 불러오지 못했습니다: {error}"},
    "choose_other": {
        "en": "Choose another model in the sidebar.",
        "ko": "왼쪽에서 다른 모델을 고르세요."},
    "crash": {
        "en": "Something went wrong while drawing this page ({kind}). Try another sentence, layer or "
              "head; if it keeps happening, please report it with the page's link.",
        "ko": "페이지를 그리다가 문제가 생겼습니다 ({kind}). 다른 문장·층·헤드를 골라 보세요. 계속되면 이 페이지의 링크와 함께 알려 주세요."},
    "stage_error": {
        "en": "This figure could not be drawn ({kind}: {msg}).",
        "ko": "이 그림을 그리지 못했습니다 ({kind}: {msg})."},
    "running": {
        "en": "Running the model…",
        "ko": "모델 실행 중…"},
    "drill": {
        "en": "Open this head",
        "ko": "이 헤드 열기"},
    "drill_pick": {
        "en": "Head to open",
        "ko": "열어 볼 헤드"},
    "overview_note": {
        "en": "H = mean entropy of a row (nats; low = focused), d = mean distance |i − j| between a "
              "query and the keys it attends to.",
        "ko": "H = 행의 평균 엔트로피 (nat; 낮을수록 집중), d = 쿼리와 그것이 주목하는 키 사이의 평균 거리 |i − j|."},
    "overview_window": {
        "en": "Showing layers {a}–{b} of {n} (around the chosen layer).",
        "ko": "전체 {n}개 층 중 {a}–{b}층을 보여 줍니다 (고른 층 주변)."},
    "cell_check": {
        "en": "Check: the hook's score is {hs}, the recomputed one {rs}; the hook's weight is {hw}, "
              "the recomputed one {rw}.",
        "ko": "확인: 훅의 점수 {hs}, 다시 계산한 점수 {rs}; 훅의 가중치 {hw}, 다시 계산한 가중치 {rw}."},
    "untrained": {
        "en": "untrained",
        "ko": "학습 안 됨"},
    "blocks.encoder.self_attn": {
        "en": "encoder self-attention",
        "ko": "인코더 셀프 어텐션"},
    "blocks.decoder.self_attn": {
        "en": "decoder masked self-attention",
        "ko": "디코더 마스크드 셀프 어텐션"},
    "blocks.decoder.cross_attn": {
        "en": "cross-attention (decoder → encoder)",
        "ko": "크로스 어텐션 (디코더 → 인코더)"},
    "models.seed": {
        "en": "seed Transformer (reverses text)",
        "ko": "seed 트랜스포머 (글자 뒤집기)"},
    "models.seed-sort": {
        "en": "seed Transformer (sorts characters)",
        "ko": "seed 트랜스포머 (글자 정렬)"},
    "models.minilm": {
        "en": "MiniLM (BERT encoder)",
        "ko": "MiniLM (BERT 인코더)"},
    "models.smollm2": {
        "en": "SmolLM2 (Llama decoder)",
        "ko": "SmolLM2 (Llama 디코더)"},
    "no_weights_here": {
        "en": "The projection weights are not available for this run.",
        "ko": "이 실행에는 투영 가중치가 없습니다."},
    "kv_head_note": {
        "en": "Head {h} reads K/V head {g} (shared with heads {others}).",
        "ko": "헤드 {h}는 K/V 헤드 {g}를 읽습니다 (헤드 {others}와 공유)."},
    "pe_learned_note": {
        "en": "Above: the model's learned position embeddings (trained parameters, no formula) for "
              "this sentence's {n} positions. Below: the paper's sinusoidal encoding, for comparison.",
        "ko": "위: 모델이 학습한 위치 임베딩 (공식이 아닌 학습된 매개변수), 이 문장의 위치 {n}개. 아래: 비교를 위한 논문의 사인파 인코딩."},
    "pe_rotary_note": {
        "en": "This model adds no positional encoding: it rotates q and k (base {n}, d_head = {d}). "
              "Below: the paper's sinusoidal encoding, for comparison.",
        "ko": "이 모델은 위치 인코딩을 더하지 않고 q와 k를 회전시킵니다 (밑 {n}, d_head = {d}). 아래: 비교를 위한 논문의 사인파 인코딩."},
    "next_position": {
        "en": "Predict after position",
        "ko": "이 위치 다음을 예측"},
    "not_for_model": {
        "en": "This view is for models with {what}.",
        "ko": "이 보기는 {what} 모델용입니다."},
    # --- figure and table labels (the views): fig_labels(lang)[name] -------------------------------
    "fig.query": {
        "en": "query",
        "ko": "쿼리"},
    "fig.key": {
        "en": "key",
        "ko": "키"},
    "fig.dim": {
        "en": "dimension",
        "ko": "차원"},
    "fig.token": {
        "en": "token",
        "ko": "토큰"},
    "fig.value": {
        "en": "value",
        "ko": "값"},
    "fig.score": {
        "en": "score",
        "ko": "점수"},
    "fig.weight": {
        "en": "weight",
        "ko": "가중치"},
    "fig.masked": {
        "en": "masked",
        "ko": "가려짐"},
    "fig.row_sum": {
        "en": "Σ row",
        "ko": "행 합"},
    "fig.allowed": {
        "en": "allowed",
        "ko": "허용"},
    "fig.padding": {
        "en": "blocked: padding",
        "ko": "차단: 패딩"},
    "fig.causal": {
        "en": "blocked: causal",
        "ko": "차단: 미래(인과)"},
    "fig.both": {
        "en": "blocked: padding + causal",
        "ko": "차단: 패딩 + 인과"},
    "fig.mask_padding": {
        "en": "padding mask",
        "ko": "패딩 마스크"},
    "fig.mask_causal": {
        "en": "causal (subsequent) mask",
        "ko": "인과(후속) 마스크"},
    "fig.mask_combined": {
        "en": "combined (what the model used)",
        "ko": "합친 마스크 (모델이 쓴 것)"},
    "fig.d_model": {
        "en": "d_model",
        "ko": "d_model"},
    "fig.d_head": {
        "en": "d_head",
        "ko": "d_head"},
    "fig.position": {
        "en": "position",
        "ko": "위치"},
    "fig.similarity": {
        "en": "PE·PE",
        "ko": "PE·PE"},
    "fig.embedding": {
        "en": "embedding",
        "ko": "임베딩"},
    "fig.encoding": {
        "en": "positional encoding",
        "ko": "위치 인코딩"},
    "fig.sum": {
        "en": "sum (enters block 0)",
        "ko": "합 (0번 블록 입력)"},
    "fig.distance": {
        "en": "distance m − n",
        "ko": "거리 m − n"},
    "fig.sentence": {
        "en": "sentence",
        "ko": "문장"},
    "fig.pad": {
        "en": "padding",
        "ko": "패딩"},
    "fig.this_head": {
        "en": "this head: z · W_O[head]",
        "ko": "이 헤드: z · W_O[헤드]"},
    "fig.all_heads": {
        "en": "all heads + bias (hook_out)",
        "ko": "모든 헤드 + 편향 (hook_out)"},
    "fig.weights": {
        "en": "weights",
        "ko": "가중치"},
    "fig.z": {
        "en": "z = weights · V",
        "ko": "z = 가중치 · V"},
    "fig.cosine": {
        "en": "cosine",
        "ko": "코사인"},
    "fig.pair": {
        "en": "pair i",
        "ko": "쌍 i"},
    "fig.theta": {
        "en": "θ_i (radians per position)",
        "ko": "θ_i (위치당 회전 각, 라디안)"},
    "fig.wavelength": {
        "en": "wavelength 2π/θ_i (positions)",
        "ko": "파장 2π/θ_i (위치)"},
    "fig.query_head": {
        "en": "query head",
        "ko": "쿼리 헤드"},
    "fig.kv_head": {
        "en": "K/V head",
        "ko": "K/V 헤드"},
    "fig.probability": {
        "en": "probability",
        "ko": "확률"},
    "fig.rank": {
        "en": "rank",
        "ko": "순위"},
    "fig.cat_padding": {
        "en": "padding",
        "ko": "패딩"},
    "fig.cat_causal": {
        "en": "causal",
        "ko": "인과"},
    "fig.cat_both": {
        "en": "padding+causal",
        "ko": "패딩+인과"},
    "fig.theta_col": {
        "en": "theta",
        "ko": "θ_i"},
    "fig.wavelength_col": {
        "en": "wavelength",
        "ko": "파장"},
    "fig.base": {
        "en": "base",
        "ko": "밑"},
    "fig.matrix": {
        "en": "matrix",
        "ko": "행렬"},
    "fig.dim_short": {
        "en": "dim",
        "ko": "차원"},
    "fig.dims": {
        "en": "dims",
        "ko": "차원"},
    "fig.shown_as": {
        "en": "shown as",
        "ko": "표시"},
    "fig.start": {
        "en": "start",
        "ko": "시작"},
    "fig.end": {
        "en": "end",
        "ko": "끝"},
    "fig.text": {
        "en": "text",
        "ko": "글자"},
    "fig.special": {
        "en": "special token",
        "ko": "특수 토큰"},
    "fig.layer": {
        "en": "layer",
        "ko": "층"},
    "fig.head": {
        "en": "head",
        "ko": "헤드"},
    "fig.entropy": {
        "en": "entropy",
        "ko": "엔트로피"},
    "fig.mean_distance": {
        "en": "mean_distance",
        "ko": "평균 거리"},
    "fig.shared_with": {
        "en": "shared with",
        "ko": "함께 쓰는 헤드"},
    "fig.sinusoidal_reference": {
        "en": "the paper's sinusoidal encoding, for reference",
        "ko": "참고용 논문의 사인파 인코딩"},
    "fig.pe_compare_title": {
        "en": "Positional encoding for two bases: {bases}",
        "ko": "두 밑의 위치 인코딩: {bases}"},
    "needs.learned": {
        "en": "learned position embeddings",
        "ko": "학습된 위치 임베딩"},
    "needs.rotary": {
        "en": "rotary positions",
        "ko": "회전 위치 인코딩"},
    "needs.next_token": {
        "en": "a decoder's next-token predictions",
        "ko": "디코더의 다음 토큰 예측"},
    # --- stages: stage.{id}.title and stage.{id}.explain (the formulas live in the stage records) ---
    "stage.tokens.title": {
        "en": "Tokens and the padded batch",
        "ko": "토큰과 패딩된 배치"},
    "stage.tokens.explain": {
        "en": "The text is cut into tokens, each with an id. Sentences of different lengths are "
              "padded to the same length so they can run as one batch; the pads (grey) must later be "
              "hidden from attention.",
        "ko": "글을 토큰으로 자르고 각 토큰에 번호(id)를 붙입니다. 길이가 다른 문장은 같은 길이로 패딩해 한 배치로 처리하며, 패딩(회색)은 나중에 어텐션에서 가려야 합니다."},
    "stage.embedding.title": {
        "en": "Embedding + positional encoding",
        "ko": "임베딩 + 위치 인코딩"},
    "stage.embedding.explain": {
        "en": "Each token id becomes a vector (its embedding, scaled by √d_model). Attention itself "
              "ignores order, so a positional encoding is added to say where each token is.",
        "ko": "각 토큰 id는 벡터(임베딩, √d_model을 곱함)가 됩니다. 어텐션 자체는 순서를 모르기 때문에, 각 토큰의 위치를 알려 주는 위치 인코딩을 더합니다."},
    "stage.pe_heatmap.title": {
        "en": "Positional encoding (position × dimension)",
        "ko": "위치 인코딩 (위치 × 차원)"},
    "stage.pe_heatmap.explain": {
        "en": "Every position gets a fixed pattern of sines and cosines. Low dimensions change "
              "quickly from one position to the next, high dimensions slowly.",
        "ko": "위치마다 사인과 코사인으로 된 고정된 패턴이 주어집니다. 앞쪽 차원은 위치에 따라 빠르게, 뒤쪽 차원은 천천히 변합니다."},
    "stage.pe_curves.title": {
        "en": "Dimensions as waves",
        "ko": "차원별 파동"},
    "stage.pe_curves.explain": {
        "en": "Each pair of dimensions is one wave: sin (solid) and cos (dashed) of the same "
              "frequency. The dots are the values this sentence's positions receive.",
        "ko": "두 차원이 한 쌍으로 하나의 파동을 이룹니다: 같은 주파수의 sin(실선)과 cos(점선). 점은 이 문장의 각 위치가 받는 값입니다."},
    "stage.pe_similarity.title": {
        "en": "Position-to-position similarity (PE·PE)",
        "ko": "위치 사이 유사도 (PE·PE)"},
    "stage.pe_similarity.explain": {
        "en": "The dot product of two encodings is largest for the same position and falls off with "
              "distance — and it depends only on the distance, not on where you start.",
        "ko": "두 인코딩의 내적은 같은 위치에서 가장 크고 거리가 멀어질수록 작아집니다. 그리고 시작 위치와 상관없이 거리에만 달려 있습니다."},
    "stage.pe_compare.title": {
        "en": "Comparing two bases n",
        "ko": "두 밑 n 비교"},
    "stage.pe_compare.explain": {
        "en": "The first pair of dimensions (i = 0) has frequency 1 whatever the base; every later pair "
              "turns faster when the base is smaller, so the encodings repeat sooner and the similarity "
              "falls off and oscillates over shorter distances.",
        "ko": "첫 번째 차원 쌍(i = 0)의 주파수는 밑과 상관없이 1입니다. 그 뒤의 쌍은 밑이 작을수록 빨리 "
              "돌기 때문에, 인코딩이 더 빨리 되풀이되고 유사도도 더 짧은 거리에서 떨어지며 출렁입니다."},
    "stage.pe_learned_sim.title": {
        "en": "Learned positions: similarity (cosine)",
        "ko": "학습된 위치: 유사도 (코사인)"},
    "stage.pe_learned_sim.explain": {
        "en": "BERT learns one vector per position instead of using a formula. The cosine between two"
              " positions' vectors shows what training made of 'nearby': similar neighbours form a "
              "bright band along the diagonal.",
        "ko": "BERT는 공식 대신 위치마다 벡터 하나를 학습합니다. 두 위치 벡터 사이의 코사인은 학습이 '가까움'을 어떻게 만들었는지 보여 줍니다: 비슷한 이웃은 "
              "대각선을 따라 밝은 띠를 이룹니다."},
    "stage.rope_freqs.title": {
        "en": "Rotary: rotation frequencies θ_i",
        "ko": "회전 위치 인코딩: 회전 주파수 θ_i"},
    "stage.rope_freqs.explain": {
        "en": "Rotary (RoPE) splits q and k into pairs of dimensions and turns pair i by the angle "
              "θ_i·pos. The first pairs turn fast (short range), the last ones slowly (long range).",
        "ko": "회전 위치 인코딩(RoPE)은 q와 k를 차원 쌍으로 나누고 쌍 i를 θ_i·pos 각도만큼 돌립니다. 앞쪽 쌍은 빠르게(짧은 거리), 뒤쪽 쌍은 "
              "천천히(먼 거리) 돕니다."},
    "stage.rope_distance.title": {
        "en": "Rotary: score vs relative distance",
        "ko": "회전 위치 인코딩: 상대 거리에 따른 점수"},
    "stage.rope_distance.explain": {
        "en": "Two fixed vectors (the same content at both ends), rotated for positions m and n: "
              "their score depends only on the distance m − n, and tends to fall as it grows.",
        "ko": "고정된 두 벡터(양 끝이 같은 내용)를 위치 m과 n에 맞게 회전시키면, 점수는 거리 m − n에만 달려 있고 거리가 멀어질수록 대체로 작아집니다."},
    "stage.gqa.title": {
        "en": "Grouped-query attention: shared K/V heads",
        "ko": "그룹 쿼리 어텐션: 공유하는 K/V 헤드"},
    "stage.gqa.explain": {
        "en": "Several query heads share one key/value head, so the model stores fewer keys and "
              "values. Each column is a query head; its cell shows which K/V head it reads.",
        "ko": "여러 쿼리 헤드가 키/값 헤드 하나를 함께 써서 저장할 키와 값이 줄어듭니다. 각 열은 쿼리 헤드이고, 칸은 그 헤드가 읽는 K/V 헤드를 보여 줍니다."},
    "stage.weights.title": {
        "en": "This head's W_Q, W_K, W_V",
        "ko": "이 헤드의 W_Q, W_K, W_V"},
    "stage.weights.explain": {
        "en": "Each head owns d_head columns of the projection matrices: they turn a d_model-wide "
              "token vector into this head's query, key and value.",
        "ko": "각 헤드는 투영 행렬의 d_head개 열을 가집니다. 이 열들이 d_model 차원의 토큰 벡터를 이 헤드의 쿼리·키·값으로 바꿉니다."},
    "stage.qkv.title": {
        "en": "Queries, keys and values",
        "ko": "쿼리, 키, 값"},
    "stage.qkv.explain": {
        "en": "Every token asks a question (its query), offers a label (its key) and carries content "
              "(its value). In cross-attention the keys and values come from the encoder.",
        "ko": "각 토큰은 질문(쿼리)을 던지고, 이름표(키)를 내밀고, 내용(값)을 담습니다. 크로스 어텐션에서는 키와 값이 인코더에서 옵니다."},
    "stage.qk.title": {
        "en": "Scores Q·Kᵀ",
        "ko": "점수 Q·Kᵀ"},
    "stage.qk.explain": {
        "en": "Each query is compared with every key by a dot product: large when they point the same"
              " way. Row i holds query i's scores for all keys.",
        "ko": "각 쿼리를 모든 키와 내적으로 비교합니다. 같은 방향을 가리킬수록 큽니다. i번째 행은 쿼리 i가 모든 키에 준 점수입니다."},
    "stage.scaled.title": {
        "en": "Scaled scores Q·Kᵀ ÷ √d_k",
        "ko": "크기를 줄인 점수 Q·Kᵀ ÷ √d_k"},
    "stage.scaled.explain": {
        "en": "Dividing by √d_k keeps the scores in a range where softmax is not saturated, so "
              "gradients still flow. Same colour range as Q·Kᵀ: the scaled scores look paler.",
        "ko": "√d_k로 나누면 점수가 softmax가 포화되지 않는 범위에 머물러 기울기가 잘 흐릅니다. Q·Kᵀ와 같은 색 범위라서 나눈 점수가 더 옅게 보입니다."},
    "stage.mask.title": {
        "en": "Masks: padding, causal, combined",
        "ko": "마스크: 패딩, 인과, 합친 것"},
    "stage.mask.explain": {
        "en": "The padding mask hides pad keys; the causal (subsequent) mask stops a decoder position"
              " from seeing later ones. The model uses both together.",
        "ko": "패딩 마스크는 패딩 키를 가리고, 인과(후속) 마스크는 디코더가 뒤의 위치를 보지 못하게 합니다. 모델은 둘을 함께 씁니다."},
    "stage.masked.title": {
        "en": "Masked scores",
        "ko": "마스크를 적용한 점수"},
    "stage.masked.explain": {
        "en": "Where the mask forbids attention the score becomes −∞ (grey cells), so its softmax "
              "weight is exactly zero.",
        "ko": "마스크가 막은 칸의 점수는 −∞(회색 칸)가 되어, softmax 가중치가 정확히 0이 됩니다."},
    "stage.softmax.title": {
        "en": "Softmax weights",
        "ko": "softmax 가중치"},
    "stage.softmax.explain": {
        "en": "Softmax turns each row of scores into weights that are positive and sum to 1 (see the "
              "Σ column): how much query i takes from each key.",
        "ko": "softmax는 점수의 각 행을 양수이고 합이 1인 가중치로 바꿉니다 (Σ 열 참고). 쿼리 i가 각 키에서 얼마나 가져오는지를 뜻합니다."},
    "stage.z.title": {
        "en": "Output z = weights · V",
        "ko": "출력 z = 가중치 · V"},
    "stage.z.explain": {
        "en": "Each query's output is the weighted average of the values, using its row of weights.",
        "ko": "각 쿼리의 출력은 자기 가중치 행으로 값(V)을 가중 평균한 것입니다."},
    "stage.out.title": {
        "en": "The head's contribution after W_O",
        "ko": "W_O를 거친 이 헤드의 기여"},
    "stage.out.explain": {
        "en": "The heads' outputs are concatenated and projected by W_O; this head's share is its z "
              "times its own d_head rows of W_O. Adding all heads (and the bias) gives the block's "
              "attention output.",
        "ko": "헤드들의 출력을 이어 붙여 W_O로 투영합니다. 이 헤드의 몫은 z에 W_O 중 자기 d_head개 행을 곱한 것이고, 모든 헤드(와 편향)를 더하면 "
              "블록의 어텐션 출력이 됩니다."},
    "stage.next_token.title": {
        "en": "Top next-token predictions",
        "ko": "다음 토큰 예측 (상위)"},
    "stage.next_token.explain": {
        "en": "A decoder predicts the next token at every position, from what it has seen so far. "
              "These are the ten most likely tokens after the chosen position, with their softmax "
              "probabilities.",
        "ko": "디코더는 위치마다 지금까지 본 것으로 다음 토큰을 예측합니다. 고른 위치 다음에 올 가능성이 가장 높은 토큰 10개와 softmax 확률입니다."},
    "stage.cell.title": {
        "en": "One cell, derived",
        "ko": "한 칸을 직접 계산하기"},
    "stage.cell.explain": {
        "en": "Follow one query i and one key j through every step: multiply q and k dimension by "
              "dimension, add up, divide by √d_k, apply the mask, then softmax over the row.",
        "ko": "쿼리 i와 키 j 하나를 모든 단계에 따라가 봅니다: q와 k를 차원별로 곱해 더하고, √d_k로 나누고, 마스크를 적용한 뒤, 행 전체에 softmax를 합니다."},
    "stage.overview.title": {
        "en": "All layers × heads",
        "ko": "모든 층 × 헤드"},
    "stage.overview.explain": {
        "en": "Every head's weights at once. Heads differ: some look at themselves, some at "
              "neighbours, some spread out. Entropy H and mean distance d summarise each.",
        "ko": "모든 헤드의 가중치를 한꺼번에 봅니다. 헤드마다 다릅니다: 자기 자신을 보거나, 이웃을 보거나, 넓게 퍼집니다. 엔트로피 H와 평균 거리 d가 각 헤드를 요약합니다."},
    # --- export (the sidebar's export section) -----------------------------------------------------
    "export.export": {
        "en": "Export (slides)",
        "ko": "내보내기 (슬라이드)"},
    "export.theme": {
        "en": "Figure theme",
        "ko": "그림 테마"},
    "export.screen": {
        "en": "screen (as shown)",
        "ko": "화면 (보이는 그대로)"},
    "export.presentation": {
        "en": "presentation (slides, 16:9)",
        "ko": "발표용 (슬라이드, 16:9)"},
    "export.preview": {
        "en": "Show the theme on the page too",
        "ko": "페이지에도 테마 적용"},
    "export.scale": {
        "en": "PNG scale",
        "ko": "PNG 배율"},
    "export.unavailable": {
        "en": "Image export is unavailable: {reason} Install with `{install}`. CSV downloads still work.",
        "ko": "이미지 내보내기를 쓸 수 없습니다: {reason} 설치: `{install}`. CSV 다운로드는 됩니다."},
    "export.all": {
        "en": "Export all stages (ZIP)",
        "ko": "모든 단계 내보내기 (ZIP)"},
    "export.prepare": {
        "en": "Prepare ZIP",
        "ko": "ZIP 만들기"},
    "export.download_zip": {
        "en": "Download ZIP",
        "ko": "ZIP 다운로드"},
    "export.preparing": {
        "en": "{done}/{total} {what}",
        "ko": "{done}/{total} {what}"},
    "export.none": {
        "en": "Choose at least one format.",
        "ko": "형식을 하나 이상 고르세요."},
    "export.failed": {
        "en": "Export failed: {error}",
        "ko": "내보내기 실패: {error}"},
    "export.stale": {
        "en": "The selection changed: prepare the ZIP again.",
        "ko": "선택이 바뀌었습니다: ZIP을 다시 만드세요."},
    "export.no_cjk_font": {
        "en": "No Korean font is installed: Korean labels in PNG and PDF files would be empty boxes. "
              "Install with `{install}`.",
        "ko": "한글 글꼴이 없어 PNG·PDF의 한글이 빈 네모로 나옵니다. 설치: `{install}`."},
    # --- decoding (the Decoding view: explorer/views/decoding.py, stage "decoding") -----------------
    "section_decoding": {
        "en": "Decoding",
        "ko": "디코딩"},
    "stage.decoding.title": {
        "en": "Decoding, one token at a time, with the key/value cache",
        "ko": "한 토큰씩 디코딩하기: 키·밸류 캐시"},
    "stage.decoding.explain": {
        "en": "A decoder writes one token per step. At step t only the newest token goes through the "
              "decoder: its query is compared with the keys of every token so far, which wait in the "
              "key/value cache (each earlier step appended its own key and value column), and nothing "
              "earlier is computed again. The causal mask costs nothing here: a later key is simply not "
              "in the cache yet. Press ▶ or drag the figure's slider: the steps switch in your browser.",
        "ko": "디코더는 한 단계에 토큰 하나를 씁니다. t번째 단계에서는 가장 새 토큰 하나만 디코더를 통과합니다. "
              "그 토큰의 쿼리를 지금까지 나온 모든 토큰의 키와 비교하는데, 이 키들은 키·밸류 캐시에 들어 있습니다 "
              "(앞 단계마다 자기 키와 밸류(V) 열을 하나씩 덧붙였습니다). 앞부분은 다시 계산하지 않습니다. "
              "인과 마스크도 따로 할 일이 없습니다: 뒤에 올 키는 아직 캐시에 없기 때문입니다. ▶를 누르거나 "
              "그림의 슬라이더를 끌어 보세요: 단계는 브라우저 안에서 바로 바뀝니다."},
    "decoding.cache": {
        "en": "**What the cache holds.** For every layer and every head: one key vector and one value "
              "vector (d_head = {d} numbers each) for every token so far — the K and V panels, one column "
              "per token. A step appends one column to each and reads them all; its query is used once and "
              "dropped, so queries are not cached. Without the cache, step t would compute the keys and "
              "values of all t + 1 tokens again instead of one.",
        "ko": "**캐시에 들어 있는 것.** 레이어마다, 헤드마다: 지금까지의 토큰 하나에 키 벡터 하나와 밸류 벡터 하나"
              "(각각 d_head = {d}개의 수) — K와 V 그림의 열 하나가 토큰 하나입니다. 한 단계는 각각에 열을 하나 "
              "덧붙이고 전부를 읽습니다. 쿼리는 한 번 쓰고 버리므로 캐시하지 않습니다. 캐시가 없으면 t번째 단계는 "
              "토큰 하나가 아니라 t + 1개 토큰 모두의 키와 밸류를 다시 계산해야 합니다."},
    "decoding.teacher_forcing": {
        "en": "**Why writing is sequential when training is not.** In training (teacher forcing) the "
              "whole correct output is known in advance: the decoder reads it shifted by one position and "
              "predicts every next token at once, in one pass, while the causal mask keeps each position "
              "from seeing the answer after it. When writing, the next input is the token the model has "
              "just chosen, which does not exist until the previous step has finished: one step at a time.",
        "ko": "**학습은 한 번에 하는데 생성은 왜 한 단계씩일까.** 학습(티처 포싱, teacher forcing)에서는 정답 "
              "출력 전체를 미리 압니다: 디코더는 그것을 한 칸 밀어서 읽고 모든 위치의 다음 토큰을 한 번의 계산으로 "
              "동시에 예측합니다. 이때 인과 마스크가 각 위치가 자기 뒤의 정답을 보지 못하게 막습니다. 생성할 때는 "
              "다음 입력이 모델이 방금 고른 토큰인데, 그 토큰은 앞 단계가 끝나야 생기므로 한 단계씩 갈 수밖에 "
              "없습니다."},
    "decoding.needs_decoder": {
        "en": "a decoder that writes text (seed, seed-sort, smollm2)",
        "ko": "글을 쓰는 디코더가 있는 (seed, seed-sort, smollm2)"},
    "decoding.no_trace": {
        "en": "No decoding trace for this sentence. The Decoding view makes one; in Python: "
              "run.with_trace(trace_data(m, run.texts[i])); on the command line: "
              "python -m explorer.export --stages decoding",
        "ko": "이 문장의 디코딩 기록이 없습니다. 디코딩 보기가 만들어 줍니다. 파이썬에서는 "
              "run.with_trace(trace_data(m, run.texts[i])), 명령줄에서는 python -m explorer.export 의 "
              "--stages 에 이 단계를 넣으면 됩니다."},
    "decoding.step_label": {
        "en": "Step (for the link, the table and the downloads)",
        "ko": "단계 (링크·표·내려받기에 쓰는 단계)"},
    "decoding.step_help": {
        "en": "The figure's own slider and ▶ switch steps in the browser without asking the server; this "
              "one sets the step the figure opens at, the step in the link (step=) and the PNG/SVG download.",
        "ko": "그림 안의 슬라이더와 ▶는 서버에 묻지 않고 브라우저에서 단계를 바꿉니다. 이 슬라이더는 그림이 "
              "처음 보여 줄 단계, 링크의 단계(step=), PNG/SVG 내려받기의 단계를 정합니다."},
    "decoding.stopped_eos": {
        "en": "{n} steps: it stopped when it wrote its end token.",
        "ko": "{n}단계: 끝 토큰을 쓰고 멈췄습니다."},
    "decoding.stopped_limit": {
        "en": "{n} steps: it stopped at the limit of {n} new tokens.",
        "ko": "{n}단계: 새 토큰 {n}개 한도에서 멈췄습니다."},
    "decoding.written_at": {
        "en": "At step {t}: the text so far, and the token it writes now",
        "ko": "{t}단계: 지금까지의 글과 지금 쓰는 토큰"},
    "decoding.gif": {
        "en": "GIF (every step)",
        "ko": "GIF (모든 단계)"},
    "decoding.pdf": {
        "en": "PDF (a page per step)",
        "ko": "PDF (단계마다 한 쪽)"},
    "decoding.step": {
        "en": "step",
        "ko": "단계"},
    "decoding.source": {
        "en": "input",
        "ko": "입력"},
    "decoding.written": {
        "en": "written so far",
        "ko": "지금까지 쓴 글"},
    "decoding.prompt_then_written": {
        "en": "the prompt (grey), then what it wrote",
        "ko": "프롬프트(회색), 그다음 모델이 쓴 글"},
    "decoding.self_short": {
        "en": "self-attention",
        "ko": "셀프 어텐션"},
    "decoding.causal_edge": {
        "en": "causal edge",
        "ko": "인과 마스크의 경계"},
    "decoding.cross_short": {
        "en": "cross-attention",
        "ko": "크로스 어텐션"},
    "decoding.top_short": {
        "en": "next tokens",
        "ko": "다음 토큰"},
    "decoding.self_panel": {
        "en": "self-attention: the new query row over the cached keys",
        "ko": "셀프 어텐션: 캐시된 키 위의 새 쿼리 행"},
    "decoding.k_panel": {
        "en": "K cache (a column per token so far)",
        "ko": "K 캐시 (지금까지의 토큰마다 한 열)"},
    "decoding.v_panel": {
        "en": "V cache",
        "ko": "밸류(V) 캐시"},
    "decoding.top_panel": {
        "en": "most likely next tokens (the chosen one in vermillion)",
        "ko": "다음 토큰 후보 (고른 토큰은 주홍색)"},
    "decoding.cross_panel": {
        "en": "cross-attention: the new row into the encoder's memory",
        "ko": "크로스 어텐션: 인코더 메모리를 보는 새 행"},
    "decoding.reads": {
        "en": "reads",
        "ko": "읽는 토큰"},
    "decoding.writes": {
        "en": "writes",
        "ko": "쓰는 토큰"},
    "decoding.candidates": {
        "en": "candidates",
        "ko": "후보"},
    "decoding.looks_at": {
        "en": "this head looks most at",
        "ko": "이 헤드가 가장 많이 보는 키"},
    "decoding.cross_looks_at": {
        "en": "its cross-attention looks most at",
        "ko": "크로스 어텐션이 가장 많이 보는 입력"},
    # --- what if, two sentences, click to drill (issue 15) ------------------------------------------
    "section_whatif": {
        "en": "What if",
        "ko": "바꿔 보기 (what if)"},
    "section_compare": {
        "en": "Two sentences",
        "ko": "두 문장 비교"},
    "stage.whatif_pattern.title": {
        "en": "This head, intact and edited",
        "ko": "이 헤드: 원래 실행과 편집한 실행"},
    "stage.whatif_pattern.explain": {
        "en": "The same head's softmax weights in the intact run (①) and under the edits (②), and their "
              "difference ② − ① (red: more weight after the edit, blue: less). Only this run changes: the "
              "model itself is never modified.",
        "ko": "같은 헤드의 softmax 가중치를 원래 실행(①)과 편집한 실행(②)에서 나란히 보고, 그 차이 ② − ①을 "
              "봅니다 (빨강: 편집 뒤 가중치가 늘어남, 파랑: 줄어듦). 바뀌는 것은 이번 실행뿐이고 모델 자체는 그대로입니다."},
    "stage.whatif_entropy.title": {
        "en": "Every head's entropy, before and after",
        "ko": "모든 헤드의 엔트로피: 편집 전과 후"},
    "stage.whatif_entropy.explain": {
        "en": "Entropy says how spread out a head's attention is (low: focused on a few keys). Left: the "
              "heads of the chosen layer, before (①) and after (②) the edits; right: the change for every "
              "layer and head.",
        "ko": "엔트로피는 헤드의 어텐션이 얼마나 퍼져 있는지를 나타냅니다 (낮을수록 몇 개의 키에 집중). "
              "왼쪽: 고른 레이어의 헤드들, 편집 전(①)과 후(②); 오른쪽: 모든 레이어와 헤드의 변화."},
    "stage.whatif_output.title": {
        "en": "What it does to the output",
        "ko": "출력에 미치는 영향"},
    "stage.whatif_output.explain": {
        "en": "The consequence for what the model produces — the seed Transformer's written text, "
              "SmolLM2's next-token probabilities, MiniLM's sentence embedding — intact (①) and edited (②).",
        "ko": "모델이 내놓는 결과가 어떻게 달라지는지 봅니다 — seed 트랜스포머가 쓴 글, SmolLM2의 다음 토큰 "
              "확률, MiniLM의 문장 임베딩 — 원래(①)와 편집(②)."},
    "stage.compare_pattern.title": {
        "en": "Two sentences, one head",
        "ko": "두 문장, 한 헤드"},
    "stage.compare_pattern.explain": {
        "en": "The same head on this sentence (①) and on a second one (②), e.g. with one word changed. "
              "The difference ② − ① lines up rows and columns by token where the tokens match; tokens "
              "without a partner are marked.",
        "ko": "같은 헤드를 이 문장(①)과 두 번째 문장(②, 예: 한 단어만 바꾼 문장)에서 봅니다. 차이 ② − ①은 "
              "토큰이 같은 곳끼리 행과 열을 맞추고, 짝이 없는 토큰은 표시합니다."},
    "whatif.controls": {
        "en": "Edits for this run (the model itself is never changed)",
        "ko": "이번 실행의 편집 (모델 자체는 바뀌지 않음)"},
    "whatif.flags": {
        "en": "Switch off",
        "ko": "끄기"},
    "whatif.flag.no_scale": {
        "en": "no_scale — no ÷√d_k (scaling off)",
        "ko": "no_scale — ÷√d_k 없음 (스케일링 끄기)"},
    "whatif.flag.no_causal": {
        "en": "no_causal — the decoder may look ahead (causal mask off)",
        "ko": "no_causal — 디코더가 뒤 위치도 봄 (인과 마스크 끄기)"},
    "whatif.flag.no_padding": {
        "en": "no_padding — pad keys are not hidden (padding mask off)",
        "ko": "no_padding — 패딩 키를 가리지 않음 (패딩 마스크 끄기)"},
    "whatif.flag.no_position": {
        "en": "no_position — no positional information",
        "ko": "no_position — 위치 정보 없음"},
    "whatif.scale": {
        "en": "scale X (q·k times X instead of 1/√d_k)",
        "ko": "scale X (q·k에 1/√d_k 대신 X를 곱함)"},
    "whatif.temperature": {
        "en": "temperature T (softmax of the scores ÷ T)",
        "ko": "temperature T (점수 ÷ T의 softmax)"},
    "whatif.off": {
        "en": "off",
        "ko": "끔"},
    "whatif.none": {
        "en": "nothing (intact)",
        "ko": "없음 (원래대로)"},
    "whatif.ablate_kind": {
        "en": "Switch off a head",
        "ko": "헤드 끄기"},
    "whatif.kind.ablate": {
        "en": "ablate — its output z = 0",
        "ko": "ablate — 출력 z = 0"},
    "whatif.kind.ablate_mean": {
        "en": "ablate_mean — z = its mean over the sentence",
        "ko": "ablate_mean — z = 문장 전체의 평균"},
    "whatif.ablate_block": {
        "en": "Block",
        "ko": "블록"},
    "whatif.ablate_layer": {
        "en": "Layer",
        "ko": "레이어"},
    "whatif.ablate_head": {
        "en": "Head",
        "ko": "헤드"},
    "whatif.all_heads": {
        "en": "all heads",
        "ko": "모든 헤드"},
    "whatif.add": {
        "en": "Add",
        "ko": "추가"},
    "whatif.ablations": {
        "en": "Heads switched off",
        "ko": "끈 헤드"},
    "whatif.text": {
        "en": "The edits as text (the link's edit=)",
        "ko": "편집을 글로 (링크의 edit=)"},
    "whatif.text_help": {
        "en": "Comma-separated, e.g. no_causal, temperature=2, ablate=decoder.cross_attn:1:* — the forms: "
              "{forms}",
        "ko": "쉼표로 구분, 예: no_causal, temperature=2, ablate=decoder.cross_attn:1:* — 형식: {forms}"},
    "whatif.bad_edit": {
        "en": "Ignored the edits `{value}`: `{error}` — showing the intact run.",
        "ko": "편집 `{value}`을(를) 무시했습니다: `{error}` — 원래 실행을 보여 줍니다."},
    "whatif.no_fit": {
        "en": "These edits do not fit {model}: `{error}` — showing the intact run.",
        "ko": "이 편집은 {model}에 맞지 않습니다: `{error}` — 원래 실행을 보여 줍니다."},
    "whatif.running": {
        "en": "Running the model with the edits…",
        "ko": "편집한 모델 실행 중…"},
    "whatif.choose": {
        "en": "Choose an edit above (e.g. switch off the causal mask) to see the intact and the edited run "
              "side by side.",
        "ko": "위에서 편집을 고르면 (예: 인과 마스크 끄기) 원래 실행과 편집한 실행을 나란히 봅니다."},
    "whatif.no_output": {
        "en": "This model has no output to compare here.",
        "ko": "이 모델에는 여기서 비교할 출력이 없습니다."},
    "whatif.output_note_seed": {
        "en": "The seed model writes greedily, one character at a time, reading what it has written; under "
              "the edits it writes again from the start, so one changed step changes what follows. The first "
              "character that differs is outlined.",
        "ko": "seed 모델은 자기가 쓴 것을 읽으며 한 글자씩 탐욕적으로 씁니다. 편집하면 처음부터 다시 쓰므로, 한 "
              "단계가 바뀌면 그 뒤가 모두 달라질 수 있습니다. 처음 달라지는 글자에 테두리를 칩니다."},
    "whatif.output_note_decoder": {
        "en": "SmolLM2's probabilities for the token after the sentence's last token. KL(① ‖ ②) says how far "
              "the edited distribution is from the intact one, in nats (0: the same).",
        "ko": "문장의 마지막 토큰 다음에 올 토큰에 대한 SmolLM2의 확률입니다. KL(① ‖ ②)은 편집한 분포가 원래 "
              "분포에서 얼마나 먼지를 nat 단위로 나타냅니다 (0: 같음)."},
    "whatif.output_note_encoder": {
        "en": "MiniLM's sentence embedding: the mean of the last layer's vectors over the real tokens, "
              "normalised (as sentence-transformers does). cos = 1: the edits changed nothing.",
        "ko": "MiniLM의 문장 임베딩: 마지막 레이어 벡터를 실제 토큰에 대해 평균 내고 정규화한 것입니다 "
              "(sentence-transformers와 같음). cos = 1이면 편집이 아무것도 바꾸지 않은 것입니다."},
    "whatif.caption_edits": {
        "en": "edits: {edits}",
        "ko": "편집: {edits}"},
    "whatif.intact": {
        "en": "intact",
        "ko": "원래"},
    "whatif.edited": {
        "en": "edited",
        "ko": "편집"},
    "whatif.difference": {
        "en": "difference",
        "ko": "차이"},
    "whatif.not_aligned": {
        "en": "not aligned (no matching token)",
        "ko": "맞출 짝 없음 (같은 토큰이 없음)"},
    "whatif.aligned_note": {
        "en": "rows and columns aligned by token; ① or ② marks a token only that run has",
        "ko": "토큰으로 행과 열을 맞춤; ① 또는 ②는 그 실행에만 있는 토큰"},
    "whatif.entropy_nats": {
        "en": "mean entropy (nats)",
        "ko": "평균 엔트로피 (nat)"},
    "whatif.entropy_change": {
        "en": "entropy change",
        "ko": "엔트로피 변화"},
    "whatif.heads_of_layer": {
        "en": "heads of layer {layer}",
        "ko": "레이어 {layer}의 헤드"},
    "whatif.character": {
        "en": "character",
        "ko": "글자"},
    "whatif.same": {
        "en": "same",
        "ko": "같음"},
    "whatif.identical": {
        "en": "the two outputs are identical",
        "ko": "두 출력이 같습니다"},
    "whatif.first_difference": {
        "en": "first difference at character {i}",
        "ko": "처음 달라지는 곳: {i}번째 글자"},
    "whatif.empty_output": {
        "en": "neither run wrote anything",
        "ko": "두 실행 모두 아무것도 쓰지 않았습니다"},
    "whatif.kl": {
        "en": "KL(① ‖ ②) = {kl} nats",
        "ko": "KL(① ‖ ②) = {kl} nat"},
    "whatif.cosine_value": {
        "en": "cos(①, ②) = {cos}",
        "ko": "cos(①, ②) = {cos}"},
    "whatif.embedding_dim": {
        "en": "embedding dimension",
        "ko": "임베딩 차원"},
    "whatif.click_cell": {
        "en": "click: derive this cell step by step",
        "ko": "클릭: 이 칸을 단계별로 계산"},
    "whatif.click_head": {
        "en": "click: open this head",
        "ko": "클릭: 이 헤드 열기"},
    "compare.text": {
        "en": "Second sentence (e.g. this one with one word changed)",
        "ko": "두 번째 문장 (예: 이 문장에서 한 단어만 바꾼 것)"},
    "compare.help": {
        "en": "Runs on its own beside the sentence on screen; the same limits: {c} characters and {t} tokens.",
        "ko": "화면의 문장과 따로 실행합니다. 한도는 같습니다: {c}자, 토큰 {t}개."},
    "compare.cut": {
        "en": "The second sentence was cut to the limits ({c} characters, {t} tokens, one line).",
        "ko": "두 번째 문장을 한도에 맞춰 잘랐습니다 ({c}자, 토큰 {t}개, 한 줄)."},
    "compare.choose": {
        "en": "Type a second sentence above to compare the same head on both.",
        "ko": "위에 두 번째 문장을 입력하면 같은 헤드를 두 문장에서 비교합니다."},
    "compare.first": {
        "en": "this sentence",
        "ko": "이 문장"},
    "compare.second": {
        "en": "second sentence",
        "ko": "두 번째 문장"},
    "compare.caption": {
        "en": "vs “{text}”",
        "ko": "비교: “{text}”"},
}


def lang_or_default(lang: str | None) -> str:
    return lang if lang in LANGS else "en"


def t(key: str, lang: str = "en", **kw) -> str:
    """The catalogue's ``key`` in ``lang`` with ``{placeholders}`` filled in (KeyError if unknown:
    a misspelt key fails loudly instead of showing itself on the page)."""
    text = WORDS[key][lang_or_default(lang)]
    return text.format(**kw) if kw else text


def fig_labels(lang: str = "en") -> dict[str, str]:
    """The figure and table labels ("fig.*" keys, without the prefix) in ``lang``."""
    lang = lang_or_default(lang)
    return {k[4:]: v[lang] for k, v in WORDS.items() if k.startswith("fig.")}


def stage_text(stage_id: str, lang: str = "en") -> dict[str, str]:
    """{"title", "explain"} of one stage in ``lang``."""
    return {"title": t(f"stage.{stage_id}.title", lang), "explain": t(f"stage.{stage_id}.explain", lang)}
