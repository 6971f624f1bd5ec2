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
        "ko": "레이어"},
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
    "why_stage": {
        "en": "it is not a stage of {model} with this block",
        "ko": "{model} 모델의 이 블록에는 없는 단계입니다"},
    "nav.label": {
        "en": "Stage or page",
        "ko": "단계 또는 페이지"},
    "nav.page": {
        "en": "Page: {name}",
        "ko": "페이지: {name}"},
    "nav.back": {
        "en": "Back: the stage before",
        "ko": "이전 단계"},
    "nav.forward": {
        "en": "Forward: the next stage",
        "ko": "다음 단계"},
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
    "box_cut": {
        "en": "The text box holds at most {n} characters: only those are used.",
        "ko": "입력 칸에는 최대 {n}자까지 들어갑니다. 그 안의 글자만 사용합니다."},
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
        "en": "Model **{name}** could not be loaded (log id `{id}`). The server's log has the details under this id.{hint}",
        "ko": "**{name}** 모델을 불러오지 못했습니다 (로그 번호 `{id}`). 자세한 내용은 서버 로그에 이 번호로 남아 있습니다.{hint}"},
    "fetch_hint": {
        "en": " If its weights are not on this machine, fetch them with `python -m model.fetch {name}` and reload.",
        "ko": " 가중치가 이 컴퓨터에 없다면 `python -m model.fetch {name}` 명령으로 받은 다음 다시 불러오세요."},
    "choose_other": {
        "en": "Choose another model in the sidebar.",
        "ko": "왼쪽에서 다른 모델을 고르세요."},
    "crash": {
        "en": "Something went wrong while drawing this page ({kind}, log id `{id}`). Try another sentence, layer "
              "or head; if it keeps happening, please report it with the page's link and this id.",
        "ko": "페이지를 그리다가 문제가 생겼습니다 ({kind}, 로그 번호 `{id}`). 다른 문장·레이어·헤드를 골라 보세요. "
              "계속되면 이 페이지의 링크와 이 번호를 함께 알려 주세요."},
    # --- quotas on expensive work, per page (explorer/quota.py), failures with a log id ---------------
    "quota.lens_wait": {
        "en": "This page asked for the logit lens of many new sentences in a short time (this server allows {n} a "
              "minute per page). Try again in {s} s; sentences already computed are shown at once.",
        "ko": "이 페이지에서 짧은 시간에 새 문장의 로짓 렌즈를 너무 많이 요청했습니다 (이 서버는 페이지마다 1분에 {n}번까지 "
              "허용합니다). {s}초 뒤에 다시 해 보세요. 이미 계산한 문장은 바로 보입니다."},
    "quota.patching_wait": {
        "en": "This page ran many patching experiments in a short time (this server allows {n} a minute per page). "
              "Try again in {s} s; experiments already run are shown at once.",
        "ko": "이 페이지에서 짧은 시간에 패칭 실험을 너무 많이 실행했습니다 (이 서버는 페이지마다 1분에 {n}번까지 허용합니다). "
              "{s}초 뒤에 다시 해 보세요. 이미 실행한 실험은 바로 보입니다."},
    "quota.export_wait": {
        "en": "This page exported many new images in a short time (this server renders {n} a minute per page). "
              "Try again in {s} s; files already made download at once.",
        "ko": "이 페이지에서 짧은 시간에 새 이미지를 너무 많이 내보냈습니다 (이 서버는 페이지마다 1분에 {n}장까지 만듭니다). "
              "{s}초 뒤에 다시 해 보세요. 이미 만든 파일은 바로 내려받을 수 있습니다."},
    "quota.lens_busy": {
        "en": "This page is still computing a logit lens. Wait until it is shown, then try again.",
        "ko": "이 페이지에서 로짓 렌즈를 아직 계산하고 있습니다. 결과가 나온 뒤에 다시 해 보세요."},
    "quota.patching_busy": {
        "en": "This page is still running a patching experiment. Wait until it is shown, then try again.",
        "ko": "이 페이지에서 패칭 실험이 아직 실행 중입니다. 결과가 나온 뒤에 다시 해 보세요."},
    "quota.export_busy": {
        "en": "An export of this page is still being made. Wait until it downloads, then click again.",
        "ko": "이 페이지의 내보내기를 아직 만들고 있습니다. 내려받기가 끝난 뒤에 다시 누르세요."},
    "export_error": {
        "en": "The export failed (log id {id}). The server's log has the details under this id.",
        "ko": "내보내기에 실패했습니다 (로그 번호 {id}). 자세한 내용은 서버 로그에 이 번호로 남아 있습니다."},
    # --- the access code of a hosted demo (explorer/access.py, ATTENTION_EXPLORER_ACCESS_CODE) -----
    "access.heading": {
        "en": "This demo asks for an access code",
        "ko": "이 데모는 접속 코드가 필요합니다"},
    "access.explain": {
        "en": "Your host has the code. You type it once; the page then stays open in this browser tab.",
        "ko": "코드는 진행자에게 받으세요. 한 번만 입력하면 이 브라우저 탭에서는 페이지가 계속 열려 있습니다."},
    "access.label": {
        "en": "Access code",
        "ko": "접속 코드"},
    "access.submit": {
        "en": "Enter",
        "ko": "입장"},
    "access.wrong": {
        "en": "That is not the code. Check it with your host and try again.",
        "ko": "코드가 맞지 않습니다. 진행자에게 확인한 뒤 다시 입력해 보세요."},
    "access.empty": {
        "en": "Type the code first.",
        "ko": "먼저 코드를 입력하세요."},
    "access.wait": {
        "en": "Many wrong codes from this tab or this network: for {s} more seconds, each wrong code is answered "
              "only after a pause. The right code still opens the page at once.",
        "ko": "이 탭이나 이 네트워크에서 틀린 코드가 여러 번 입력되었습니다. 앞으로 {s}초 동안은 틀린 코드에 잠시 "
              "뒤에 답합니다. 맞는 코드는 언제든 바로 열립니다."},
    "access.failed": {
        "en": "The access check could not be shown. Reload the page in a moment.",
        "ko": "접속 확인 화면을 표시하지 못했습니다. 잠시 뒤 페이지를 새로 고치세요."},
    "stage_error": {
        "en": "This figure could not be drawn ({kind}, log id `{msg}`). The server's log has the details under this id.",
        "ko": "이 그림을 그리지 못했습니다 ({kind}, 로그 번호 `{msg}`). 자세한 내용은 서버 로그에 이 번호로 남아 있습니다."},
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
        "ko": "전체 {n}개 레이어 중 {a}–{b}번 레이어를 보여 줍니다 (고른 레이어 주변)."},
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
    "models.gemma3": {
        "en": "Gemma 3 270M (reads Korean; sliding window, QK-norm)",
        "ko": "Gemma 3 270M (한국어를 읽음; 슬라이딩 윈도, QK 정규화)"},
    "no_weights_here": {
        "en": "The projection weights are not available for this run.",
        "ko": "이 실행에는 투영 가중치가 없습니다."},
    "kv_head_note": {
        "en": "Head {h} reads K/V head {g} (shared with heads {others}).",
        "ko": "{h}번 헤드는 {g}번 K/V 헤드를 읽습니다 ({others}번 헤드와 함께 씀)."},
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
        "en": "padding\nmask",
        "ko": "패딩\n마스크"},
    "fig.mask_causal": {
        "en": "causal\nmask",
        "ko": "인과\n마스크"},
    "fig.mask_combined": {
        "en": "combined\n(used)",
        "ko": "합친 것\n(사용)"},
    "fig.mask_padding_only": {
        "en": "padding mask (what the model used)",
        "ko": "패딩 마스크 (모델이 쓴 것)"},
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
    "fig.embedding_type": {
        "en": "word + type embedding",
        "ko": "단어 + 타입 임베딩"},
    "fig.pos_learned": {
        "en": "learned position embedding",
        "ko": "학습된 위치 임베딩"},
    "fig.sum_norm": {
        "en": "sum (then LayerNorm, then block 0)",
        "ko": "합 (다음에 LayerNorm, 그다음 0번 블록)"},
    "fig.embedding_only": {
        "en": "embedding (enters block 0 as it is)",
        "ko": "임베딩 (그대로 0번 블록 입력)"},
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
    "fig.all_heads_nobias": {
        "en": "all heads (hook_out; no bias)",
        "ko": "모든 헤드 (hook_out, 편향 없음)"},
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
        "ko": "레이어"},
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
    "stage.tokens.explain.text": {
        "en": "The text is cut into tokens, each with an id (one of {V}). Sentences of different lengths are "
              "padded to the same length so they can run as one batch; the pads (grey) must later be "
              "hidden from attention.",
        "ko": "글을 토큰으로 자르고 각 토큰에 번호(id, {V}개 중 하나)를 붙입니다. 길이가 다른 문장은 같은 길이로 패딩해 한 배치로 처리하며, 패딩(회색)은 나중에 어텐션에서 가려야 합니다."},
    "stage.tokens.explain.decoder": {
        "en": "The decoder's input is {start} followed by what the model wrote, shifted one place right: position t "
              "holds the token chosen at step t − 1. The figures below are one pass over this whole sequence at "
              "once (teacher forcing on the model's own output); the causal mask keeps each position from "
              "reading later ones, so every row is what the model saw when it chose the next token.",
        "ko": "디코더의 입력은 {start} 뒤에 모델이 쓴 것을 이어 붙여 오른쪽으로 한 칸 민 것입니다: t번 위치에는 t − 1번째 "
              "단계에서 고른 토큰이 있습니다. 아래 그림은 이 시퀀스 전체를 한 번에 통과시킨 결과(모델 자신의 출력으로 하는 "
              "티처 포싱)이며, 인과 마스크가 각 위치가 뒤의 위치를 읽지 못하게 하므로 각 행은 모델이 다음 토큰을 고를 때 "
              "본 것과 같습니다."},
    "stage.embedding.title": {
        "en": "Embedding + positional encoding",
        "ko": "임베딩 + 위치 인코딩"},
    "stage.embedding.title.learned": {
        "en": "Embedding + learned positions, then LayerNorm",
        "ko": "임베딩 + 학습된 위치, 그다음 LayerNorm"},
    "stage.embedding.title.rotary": {
        "en": "Token embedding (no positional vector: rotary)",
        "ko": "토큰 임베딩 (위치 벡터 없음: 회전 위치 인코딩)"},
    "stage.embedding.explain.scaled": {
        "en": "Each token id picks a row of the embedding matrix E, multiplied by √d_model = {scale}; then the "
              "positional encoding is added, because attention itself ignores order. Why √d_model: the one "
              "matrix E is also the output layer, and its entries are small (rms {rms_raw} on this sentence); "
              "multiplied by √d_model the embedding has about unit size, comparable to the encoding, whose values "
              "lie in [−1, 1], so neither drowns the other. This sentence: rms {rms_e} for the scaled "
              "embedding, {rms_pe} for the encoding.",
        "ko": "각 토큰 id가 임베딩 행렬 E의 한 행을 고르고 여기에 √d_model(= {scale})을 곱한 뒤, 위치 인코딩을 "
              "더합니다 (어텐션 자체는 순서를 모르기 때문입니다). √d_model을 곱하는 이유: 같은 행렬 E가 출력 "
              "레이어로도 쓰이고 성분이 작습니다 (이 문장에서 RMS {rms_raw}). √d_model을 곱하면 임베딩의 크기가 1 "
              "정도가 되어, 값이 [−1, 1] 안에 있는 위치 인코딩과 크기가 비슷해지고 어느 쪽도 다른 쪽에 묻히지 "
              "않습니다. 이 문장: 스케일링한 임베딩의 RMS {rms_e}, 위치 인코딩의 RMS {rms_pe}."},
    "stage.embedding.explain.learned": {
        "en": "BERT adds three learned vectors per token: its word embedding, a token-type embedding (type 0 "
              "here: one sentence per row) and the position embedding of its place; a LayerNorm then "
              "normalises the sum, and that enters block 0. Nothing is multiplied by √d_model: the tables were "
              "trained at the size they are used.",
        "ko": "BERT는 토큰마다 학습된 벡터 세 개를 더합니다: 단어 임베딩, 토큰 타입 임베딩(한 행에 한 문장이므로 "
              "0번 타입), 그 자리의 위치 임베딩입니다. 그 합을 LayerNorm으로 정규화한 것이 0번 블록에 들어갑니다. "
              "√d_model은 곱하지 않습니다: 표들이 쓰이는 크기 그대로 학습되었습니다."},
    "stage.embedding.explain.rotary": {
        "en": "Each token id picks a row of the embedding matrix, and that row enters block 0 as it is: it is "
              "not multiplied by √d_model and no positional vector is added. Position enters inside attention "
              "instead: every layer rotates q and k by angles that grow with the position (RoPE).",
        "ko": "각 토큰 id가 임베딩 행렬의 한 행을 고르고, 그 행이 그대로 0번 블록에 들어갑니다: √d_model을 곱하지 "
              "않고 위치 벡터도 더하지 않습니다. 위치는 어텐션 안에서 들어갑니다: 레이어마다 q와 k를 위치에 따라 "
              "커지는 각도만큼 회전시킵니다(RoPE)."},
    "stage.embedding.explain.unscaled": {
        "en": "Each token id picks a row of the embedding matrix (not scaled), and a positional encoding is "
              "added, because attention itself ignores order.",
        "ko": "각 토큰 id가 임베딩 행렬의 한 행을 고르고(스케일링 없음), 어텐션 자체는 순서를 모르기 때문에 위치 "
              "인코딩을 더합니다."},
    "stage.pe_heatmap.title": {
        "en": "Positional encoding (position × dimension)",
        "ko": "위치 인코딩 (위치 × 차원)"},
    "stage.pe_heatmap.title.learned": {
        "en": "Learned position embeddings (position × dimension)",
        "ko": "학습된 위치 임베딩 (위치 × 차원)"},
    "stage.pe_heatmap.explain.sinusoidal": {
        "en": "Every position gets a fixed pattern of sines and cosines (n = {n}, d_model = {d}). Low "
              "dimensions change quickly from one position to the next, high dimensions slowly.",
        "ko": "위치마다 사인과 코사인으로 된 고정된 패턴이 주어집니다 (n = {n}, d_model = {d}). 앞쪽 차원은 위치에 "
              "따라 빠르게, 뒤쪽 차원은 천천히 변합니다."},
    "stage.pe_heatmap.explain.learned": {
        "en": "This model learned one vector per position: a table of {rows} rows, trained with the rest of the "
              "model; this sentence uses the first {T}. There is no formula and no sines or cosines: the rows "
              "are whatever training made of them.",
        "ko": "이 모델은 위치마다 벡터 하나를 학습했습니다: 나머지 모델과 함께 학습된 {rows}행짜리 표이고, 이 문장은 "
              "처음 {T}행을 씁니다. 공식도 사인·코사인도 없습니다: 각 행은 학습이 만든 그대로입니다."},
    "stage.pe_curves.title": {
        "en": "Dimensions as waves",
        "ko": "차원별 파동"},
    "stage.pe_curves.explain.sinusoidal": {
        "en": "Each pair of dimensions is one wave: sin (solid) and cos (dashed) of the same frequency. The "
              "dots are the values positions 0 to {last} receive (n = {n}, d_model = {d}).",
        "ko": "두 차원이 한 쌍으로 하나의 파동을 이룹니다: 같은 주파수의 사인(실선)과 코사인(점선). 점은 0번부터 "
              "{last}번 위치가 받는 값입니다 (n = {n}, d_model = {d})."},
    "stage.pe_curves.explain.reference": {
        "en": "This model uses {kind}, not the sinusoidal encoding; drawn here for reference: the paper's "
              "encoding with n = {n}, d_model = {d}. Each pair of dimensions is one wave: sin (solid) and cos "
              "(dashed) of the same frequency; the dots are positions 0 to {last}.",
        "ko": "이 모델은 사인파 인코딩이 아니라 {kind}을(를) 씁니다. 참고용으로 논문의 인코딩을 그렸습니다 "
              "(n = {n}, d_model = {d}). 두 차원이 한 쌍으로 같은 주파수의 사인(실선)과 코사인(점선) 파동을 "
              "이루며, 점은 0번부터 {last}번 위치입니다."},
    "stage.pe_similarity.title": {
        "en": "Position-to-position similarity (PE·PE)",
        "ko": "위치 사이 유사도 (PE·PE)"},
    "stage.pe_similarity.explain.sinusoidal": {
        "en": "The paper's sinusoidal encoding (n = {n}, d_model = {d}): the dot product of two encodings is "
              "largest for the same position and falls off with distance — and it depends only on the "
              "distance, not on where you start.",
        "ko": "논문의 사인파 인코딩 (n = {n}, d_model = {d}): 두 인코딩의 내적은 같은 위치에서 가장 크고 거리가 "
              "멀어질수록 작아집니다. 그리고 시작 위치와 상관없이 거리에만 달려 있습니다."},
    "stage.pe_similarity.explain.learned": {
        "en": "The dot products of this model's learned position vectors. Unlike the sinusoidal encoding, "
              "nothing makes them depend on the distance only: this is what training made of nearby positions.",
        "ko": "이 모델이 학습한 위치 벡터들의 내적입니다. 사인파 인코딩과 달리 거리에만 달려 있도록 만드는 것은 "
              "없습니다: 학습이 가까운 위치를 어떻게 만들었는지 보여 줍니다."},
    "stage.pe_compare.title": {
        "en": "Comparing two bases n",
        "ko": "두 밑 n 비교"},
    "stage.pe_compare.explain": {
        "en": "Drawn: n = {a} and n = {b}, d_model = {d}. The first pair of dimensions (i = 0) has frequency 1 whatever the base; every later pair "
              "turns faster when the base is smaller, so the encodings repeat sooner and the similarity "
              "falls off and oscillates over shorter distances.",
        "ko": "그린 것: n = {a}, n = {b}, d_model = {d}. 첫 번째 차원 쌍(i = 0)의 주파수는 밑과 상관없이 1입니다. 그 뒤의 쌍은 밑이 작을수록 빨리 "
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
        "ko": "여러 쿼리 헤드가 키/밸류 헤드 하나를 함께 써서 저장할 키와 밸류가 줄어듭니다. 각 열은 쿼리 헤드이고, 칸은 그 헤드가 읽는 K/V 헤드를 보여 줍니다."},
    "stage.weights.title": {
        "en": "This head's W_Q, W_K, W_V",
        "ko": "이 헤드의 W_Q, W_K, W_V"},
    "stage.weights.explain.bias": {
        "en": "Each head owns d_k = {k} columns of each projection matrix (d_model = {d} rows) and d_k entries "
              "of its bias: q = x·W_Q + b_Q, and likewise k and v. The last row, b, is the bias: with it, the x "
              "and W on screen give exactly the model's q.",
        "ko": "각 헤드는 투영 행렬마다 d_k(= {k})개 열(d_model = {d}행)과 편향의 d_k개 성분을 가집니다: "
              "q = x·W_Q + b_Q이고 k와 v도 같습니다. 마지막 행 b가 편향입니다: 이것까지 있어야 화면의 x와 W로 "
              "모델의 q가 정확히 나옵니다."},
    "stage.weights.explain.no_bias": {
        "en": "Each head owns d_k = {k} columns of each projection matrix (d_model = {d} rows). This model's "
              "projections have no bias: q = x·W_Q, k = x·W_K, v = x·W_V.",
        "ko": "각 헤드는 투영 행렬마다 d_k(= {k})개 열(d_model = {d}행)을 가집니다. 이 모델의 투영에는 편향이 "
              "없습니다: q = x·W_Q, k = x·W_K, v = x·W_V."},
    "stage.qkv.title": {
        "en": "Queries, keys and values",
        "ko": "쿼리, 키, 밸류"},
    "stage.qkv.explain.self": {
        "en": "Every token asks a question (its query), offers a label (its key) and carries content (its "
              "value). X is the stream entering layer {layer}: for layer 0 what the embedding stage gives, "
              "later the previous layer's output. In self-attention Q, K and V all come from the same X.",
        "ko": "각 토큰은 질문(쿼리)을 던지고, 이름표(키)를 내밀고, 내용(밸류)을 담습니다. X는 {layer}번 레이어에 "
              "들어오는 스트림입니다: 0번 레이어에서는 임베딩 단계의 결과, 그 뒤로는 앞 레이어의 출력입니다. 셀프 "
              "어텐션에서는 Q, K, V가 모두 같은 X에서 나옵니다."},
    "stage.qkv.explain.rotary": {
        "en": "Every token asks a question (its query), offers a label (its key) and carries content (its "
              "value). The stream X entering layer {layer} is normalised first (RMSNorm, before the sublayer); "
              "then q and k are rotated by their position (RoPE), v is not. This model's projections have no "
              "bias.",
        "ko": "각 토큰은 질문(쿼리)을 던지고, 이름표(키)를 내밀고, 내용(밸류)을 담습니다. {layer}번 레이어에 "
              "들어오는 스트림 X를 먼저 정규화하고(RMSNorm, 서브레이어 앞), q와 k만 위치에 따라 회전시킵니다(RoPE). "
              "이 모델의 투영에는 편향이 없습니다."},
    "stage.qkv.explain.cross": {
        "en": "In cross-attention the queries come from the decoder (Y: its stream after the masked "
              "self-attention sublayer of layer {layer}) and the keys and values from the encoder's output H: "
              "the stream after the last encoder layer ({last}), the same H for every decoder layer.",
        "ko": "크로스 어텐션에서 쿼리는 디코더에서 옵니다 (Y: {layer}번 레이어의 마스크드 셀프 어텐션 서브레이어를 "
              "거친 스트림). 키와 밸류는 인코더 출력 H에서 옵니다: 마지막 인코더 레이어({last}번)를 거친 스트림이며, "
              "모든 디코더 레이어가 같은 H를 읽습니다."},
    "stage.qk.title": {
        "en": "Scores Q·Kᵀ",
        "ko": "점수 Q·Kᵀ"},
    "stage.qk.explain": {
        "en": "Each query is compared with every key by a dot product: large when they point the same"
              " way. Row i holds query i's scores for all keys.",
        "ko": "각 쿼리를 모든 키와 내적으로 비교합니다. 같은 방향을 가리킬수록 큽니다. i번째 행은 쿼리 i가 모든 키에 준 점수입니다."},
    "stage.scaled.title": {
        "en": "Scaled scores Q·Kᵀ ÷ √d_k",
        "ko": "스케일링한 점수 Q·Kᵀ ÷ √d_k"},
    "stage.scaled.explain": {
        "en": "Dividing by √d_k (= √{k} ≈ {sqrt}) keeps the scores in a range where softmax is not saturated, "
              "so gradients still flow. Same colour range as Q·Kᵀ: the scaled scores look paler.",
        "ko": "√d_k(= √{k} ≈ {sqrt})로 나누면 점수가 소프트맥스를 포화시키지 않는 범위에 머물러 기울기가 잘 "
              "흐릅니다. Q·Kᵀ와 같은 색 범위로 그렸기 때문에 스케일링한 점수가 더 옅게 보입니다."},
    "stage.mask.title": {
        "en": "Masks: padding, causal, combined",
        "ko": "마스크: 패딩, 인과, 합친 것"},
    "stage.mask.title.padding": {
        "en": "Mask: padding",
        "ko": "마스크: 패딩"},
    "stage.mask.title.cross": {
        "en": "Mask: padding of the source",
        "ko": "마스크: 원문의 패딩"},
    "stage.mask.explain.causal": {
        "en": "The padding mask hides pad keys; the causal (subsequent) mask stops each position from seeing "
              "later ones. This block, a decoder's self-attention, uses both together.",
        "ko": "패딩 마스크는 패딩 키를 가리고, 인과(후속) 마스크는 각 위치가 뒤의 위치를 보지 못하게 합니다. 디코더의 "
              "셀프 어텐션인 이 블록은 둘을 함께 씁니다."},
    "stage.mask.explain.padding": {
        "en": "Only the padding mask applies here: pad keys are hidden from every query. There is no causal "
              "mask: every token may attend to every real token, before or after it.",
        "ko": "여기에는 패딩 마스크만 있습니다: 패딩 키를 모든 쿼리에서 가립니다. 인과 마스크는 없습니다: 각 토큰은 "
              "앞뒤의 모든 실제 토큰에 주목할 수 있습니다."},
    "stage.mask.explain.cross": {
        "en": "Only the padding mask applies: the keys are the encoder's positions, and the source's pad keys "
              "are hidden. There is no causal mask: every decoder position may read the whole source.",
        "ko": "패딩 마스크만 있습니다: 키는 인코더의 위치이고, 원문의 패딩 키를 가립니다. 인과 마스크는 없습니다: "
              "디코더의 모든 위치가 원문 전체를 읽을 수 있습니다."},
    "stage.masked.title": {
        "en": "Masked scores",
        "ko": "마스크를 적용한 점수"},
    "stage.masked.explain": {
        "en": "Where the mask forbids attention the score becomes −∞ (grey cells; {blocked} here), so its "
              "softmax weight is exactly zero. Tutorial 000 writes −1e9 and tutorial 003 −1e10 instead: in "
              "float32, e^(−1e9 − max) underflows to exactly 0 as well, so the weights come out the same "
              "(recomputed for this head with each, the largest difference is {diff}). −∞ says it exactly; "
              "they differ only on a row with nothing allowed, where −∞ gives NaN (the model writes 0 there) "
              "and −1e9 a uniform row.",
        "ko": "마스크가 막은 칸의 점수는 −∞(회색 칸, 여기서는 {blocked}칸)가 되어 소프트맥스 가중치가 정확히 0이 "
              "됩니다. 튜토리얼 000은 −1e9, 003은 −1e10을 씁니다: float32에서는 e^(−1e9 − max)도 정확히 0으로 "
              "언더플로되므로 가중치는 똑같습니다 (이 헤드를 두 방식으로 다시 계산한 최대 차이: {diff}). −∞는 그것을 "
              "그대로 나타냅니다. 둘이 다른 경우는 허용된 칸이 하나도 없는 행뿐입니다: −∞는 NaN을 내고(모델은 "
              "그 자리에 0을 씀) −1e9는 균등한 행을 냅니다."},
    "stage.softmax.title": {
        "en": "Softmax weights",
        "ko": "소프트맥스 가중치"},
    "stage.softmax.explain": {
        "en": "Softmax turns each row of scores into weights that are positive and sum to 1 (see the "
              "Σ column): how much query i takes from each key.",
        "ko": "소프트맥스는 점수의 각 행을 양수이고 합이 1인 가중치로 바꿉니다 (Σ 열 참고). 쿼리 i가 각 키에서 얼마나 가져오는지를 뜻합니다."},
    "stage.z.title": {
        "en": "Output z = weights · V",
        "ko": "출력 z = 가중치 · V"},
    "stage.z.explain": {
        "en": "Each query's output is the weighted average of the values, using its row of weights.",
        "ko": "각 쿼리의 출력은 자기 가중치 행으로 밸류(V)를 가중 평균한 것입니다."},
    "stage.out.title": {
        "en": "The head's contribution after W_O",
        "ko": "W_O를 거친 이 헤드의 기여"},
    "stage.out.explain.bias": {
        "en": "The heads' outputs are concatenated and projected by W_O; this head's share is its z "
              "times its own d_head rows of W_O. Adding all heads (and the bias) gives the block's "
              "attention output.",
        "ko": "헤드들의 출력을 이어 붙여 W_O로 투영합니다. 이 헤드의 몫은 z에 W_O 중 자기 d_head개 행을 곱한 것이고, 모든 헤드(와 편향)를 더하면 "
              "블록의 어텐션 출력이 됩니다."},
    "stage.out.explain.no_bias": {
        "en": "The heads' outputs are concatenated and projected by W_O; this head's share is its z times its "
              "own d_head rows of W_O. Adding all heads gives the block's attention output (this model's W_O "
              "has no bias).",
        "ko": "헤드들의 출력을 이어 붙여 W_O로 투영합니다. 이 헤드의 몫은 z에 W_O 중 자기 d_head개 행을 곱한 "
              "것이고, 모든 헤드를 더하면 블록의 어텐션 출력이 됩니다 (이 모델의 W_O에는 편향이 없습니다)."},
    "stage.next_token.title": {
        "en": "Top next-token predictions",
        "ko": "다음 토큰 예측 (상위)"},
    "stage.next_token.explain": {
        "en": "A decoder predicts the next token at every position, from what it has seen so far. "
              "These are the ten most likely tokens after the chosen position, with their softmax "
              "probabilities.",
        "ko": "디코더는 위치마다 지금까지 본 것으로 다음 토큰을 예측합니다. 고른 위치 다음에 올 가능성이 가장 높은 토큰 10개와 소프트맥스 확률입니다."},
    "stage.cell.title": {
        "en": "One cell, derived",
        "ko": "한 칸을 직접 계산하기"},
    "stage.cell.explain": {
        "en": "Follow one query i and one key j through every step: multiply q and k dimension by "
              "dimension, add up, divide by √d_k, apply the mask, then softmax over the row.",
        "ko": "쿼리 i와 키 j 하나를 모든 단계에 따라가 봅니다: q와 k를 차원별로 곱해 더하고, √d_k로 나누고, 마스크를 적용한 뒤, 행 전체에 소프트맥스를 적용합니다."},
    "stage.overview.title": {
        "en": "All layers × heads",
        "ko": "모든 레이어 × 헤드"},
    "stage.overview.explain": {
        "en": "Every head's weights at once. Heads differ: some look at themselves, some at "
              "neighbours, some spread out. Entropy H and mean distance d summarise each.",
        "ko": "모든 헤드의 가중치를 한꺼번에 봅니다. 헤드마다 다릅니다: 자기 자신을 보거나, 이웃을 보거나, 넓게 퍼집니다. 엔트로피 H와 평균 거리 d가 각 헤드를 요약합니다."},
    # --- the whole block, shapes, tutorial 002 (issue 13) -------------------------------------------
    "section_block": {
        "en": "The whole block",
        "ko": "블록 전체"},
    "shape": {
        "en": "Shapes",
        "ko": "텐서 형태"},
    "pe_tutorial": {
        "en": "Tutorial 002's example: d_model = 4, ten positions, n = 100 and n = 10000",
        "ko": "튜토리얼 002 예제: d_model = 4, 위치 10개, n = 100과 n = 10000"},
    "pe_tutorial_help": {
        "en": "Sets the controls to the tutorial's worked example and shows its numbers; switch off to go "
              "back to this model's settings.",
        "ko": "조절값을 튜토리얼의 예제로 맞추고 그 숫자를 보여 줍니다. 끄면 이 모델의 설정으로 돌아갑니다."},
    "ffn_widen": {
        "en": "widen from d_model = {d} to d_ff = {d_ff} ({ratio}×)",
        "ko": "d_model(= {d})에서 d_ff(= {d_ff})로 넓히고({ratio}배)"},
    "ffn_same": {
        "en": "project from d_model = {d} to d_ff = {d_ff} (no wider in this model; the paper widens 4×)",
        "ko": "d_model(= {d})에서 d_ff(= {d_ff})로 투영하고(이 모델은 넓히지 않음, 논문은 4배)"},
    "ffn_input_post": {
        "en": "the stream after the attention sublayer's add & norm",
        "ko": "어텐션 서브레이어의 잔차 연결과 정규화를 거친 스트림"},
    "ffn_input_pre": {
        "en": "RMSNorm of the stream (the stream itself is not normalised)",
        "ko": "스트림의 RMSNorm (스트림 자체는 정규화하지 않음)"},
    "norm_extra_bert": {
        "en": "Before block 0 one more LayerNorm normalises the embedding sum.",
        "ko": "0번 블록 앞에서 LayerNorm이 하나 더 임베딩의 합을 정규화합니다."},
    "norm_extra_llama": {
        "en": "After the last block one more RMSNorm comes before the output layer.",
        "ko": "마지막 블록 뒤, 출력 레이어 앞에 RMSNorm이 하나 더 있습니다."},
    "norm_extra_none": {
        "en": "Nothing else normalises the stream: embedding + encoding enters block 0 as it is.",
        "ko": "그 밖에는 스트림을 정규화하지 않습니다: 임베딩 + 위치 인코딩이 그대로 0번 블록에 들어갑니다."},
    "needs.pe_table": {
        "en": "a positional vector added to the embedding",
        "ko": "임베딩에 더하는 위치 벡터가 있는"},
    "needs.generator": {
        "en": "an encoder–decoder's generator",
        "ko": "생성기가 있는 인코더–디코더"},
    "positional.sinusoidal": {
        "en": "the sinusoidal encoding",
        "ko": "사인파 인코딩"},
    "positional.learned": {
        "en": "learned position embeddings",
        "ko": "학습된 위치 임베딩"},
    "positional.rotary": {
        "en": "rotary positions (RoPE)",
        "ko": "회전 위치 인코딩(RoPE)"},
    "dim.batch": {"en": "batch", "ko": "배치"},
    "dim.heads": {"en": "heads", "ko": "헤드"},
    "dim.kv_heads": {"en": "K/V heads", "ko": "K/V 헤드"},
    "dim.positions": {"en": "positions", "ko": "위치"},
    "dim.source": {"en": "source positions", "ko": "원문 위치"},
    "dim.queries": {"en": "queries", "ko": "쿼리"},
    "dim.keys": {"en": "keys", "ko": "키"},
    "dim.d_k": {"en": "d_k", "ko": "d_k"},
    "dim.d_model": {"en": "d_model", "ko": "d_model"},
    "dim.d_ff": {"en": "d_ff", "ko": "d_ff"},
    "dim.heads·d_k": {"en": "heads·d_k", "ko": "헤드·d_k"},
    "dim.kv_heads·d_k": {"en": "K/V heads·d_k", "ko": "K/V 헤드·d_k"},
    "dim.vocab": {"en": "vocabulary", "ko": "어휘"},
    "dim.layers": {"en": "layers", "ko": "레이어"},
    "dim.pairs": {"en": "pairs", "ko": "쌍"},
    "tensor.ids": {"en": "token ids", "ko": "토큰 id"},
    "tensor.block0_input": {"en": "input of block 0", "ko": "0번 블록의 입력"},
    "tensor.attn_out": {"en": "attention output", "ko": "어텐션 출력"},
    "tensor.logits": {"en": "logits", "ko": "로짓"},
    "tensor.ffn_hidden": {"en": "feed-forward hidden layer", "ko": "피드포워드 은닉층"},
    "tensor.layer_output": {"en": "layer output", "ko": "레이어 출력"},
    "tensor.tutorial_embedding": {"en": "the tutorial's embeddings", "ko": "튜토리얼의 임베딩"},
    "chain.ids": {"en": "token ids", "ko": "토큰 id"},
    "chain.ids_dec": {
        "en": "decoder input: {start} + what the model wrote, shifted one place right",
        "ko": "디코더 입력: {start} + 모델이 쓴 것, 오른쪽으로 한 칸 민 것"},
    "chain.embed": {"en": "embedding E[t]", "ko": "임베딩 E[t]"},
    "chain.embed_scaled": {"en": "embedding E[t] · √d_model (= {scale})", "ko": "임베딩 E[t] · √d_model (= {scale})"},
    "chain.pe": {"en": "+ positional encoding PE (the same for every sentence)",
                 "ko": "+ 위치 인코딩 PE (모든 문장에 같음)"},
    "chain.pe_learned": {"en": "+ learned position embedding P (+ token type)",
                         "ko": "+ 학습된 위치 임베딩 P (+ 토큰 타입)"},
    "chain.embed_norm": {"en": "LayerNorm of the sum", "ko": "합의 LayerNorm"},
    "chain.earlier_layers": {"en": "{n} earlier layer(s): the same steps", "ko": "앞의 레이어 {n}개: 같은 단계"},
    "chain.layer_input": {"en": "X: the input of layer {layer}", "ko": "X: {layer}번 레이어의 입력"},
    "chain.self_sublayer": {"en": "Y: after the masked self-attention sublayer (add & norm)",
                            "ko": "Y: 마스크드 셀프 어텐션 서브레이어 뒤 (잔차 연결과 정규화)"},
    "chain.rmsnorm_in": {"en": "RMSNorm(X): what the attention reads", "ko": "RMSNorm(X): 어텐션이 읽는 것"},
    "chain.encoder_output": {"en": "H: the encoder's output (after its last layer): the keys' and values' source",
                             "ko": "H: 인코더 출력 (마지막 레이어 뒤): 키와 밸류의 재료"},
    "chain.project_q": {"en": "·W_Q for all heads at once", "ko": "모든 헤드를 한 번에 ·W_Q"},
    "chain.project_q_b": {"en": "·W_Q + b_Q for all heads at once", "ko": "모든 헤드를 한 번에 ·W_Q + b_Q"},
    "chain.project_kv": {"en": "·W_K and ·W_V for all K/V heads at once", "ko": "모든 K/V 헤드를 한 번에 ·W_K, ·W_V"},
    "chain.project_kv_b": {"en": "·W_K + b_K and ·W_V + b_V for all heads at once",
                           "ko": "모든 헤드를 한 번에 ·W_K + b_K, ·W_V + b_V"},
    "chain.split_q": {"en": "split into {h} heads of d_k = {k} (view, then transpose): Q",
                      "ko": "헤드 {h}개로 나누기, d_k = {k} (모양 바꾸기 후 전치): Q"},
    "chain.split_q_rope": {"en": "split into {h} heads of d_k = {k} (모양 바꾸기, 전치), rotated by position (RoPE): Q",
                           "ko": "헤드 {h}개로 나누기, d_k = {k} (모양 바꾸기, 전치), 위치만큼 회전(RoPE): Q"},
    "chain.split_kv": {"en": "split into {h} heads of d_k = {k}: K (and V)",
                       "ko": "헤드 {h}개로 나누기, d_k = {k}: K (V도 같음)"},
    "chain.split_kv_rope": {"en": "split into {h} heads of d_k = {k}; K rotated by position (RoPE): K (and V)",
                            "ko": "헤드 {h}개로 나누기, d_k = {k}; K는 위치만큼 회전(RoPE): K (V도 같음)"},
    "chain.repeat_kv": {"en": "each K/V head repeated for its {g} query heads (grouped-query): K, V",
                        "ko": "K/V 헤드마다 쿼리 헤드 {g}개에 복제 (그룹 쿼리): K, V"},
    "chain.scores": {"en": "scores Q·Kᵀ / √d_k (√{k})", "ko": "점수 Q·Kᵀ / √d_k (√{k})"},
    "chain.mask": {"en": "padding mask (one for all heads)", "ko": "패딩 마스크 (모든 헤드에 하나)"},
    "chain.mask_causal": {"en": "padding ∧ causal mask (one for all heads)",
                          "ko": "패딩 ∧ 인과 마스크 (모든 헤드에 하나)"},
    "chain.softmax": {"en": "softmax over the keys: weights A", "ko": "키 방향 소프트맥스: 가중치 A"},
    "chain.z": {"en": "A·V = Z, in each head", "ko": "헤드마다 A·V = Z"},
    "chain.concat": {"en": "concatenate the heads (transpose, then view)", "ko": "헤드 이어 붙이기 (전치 후 모양 바꾸기)"},
    "chain.w_o": {"en": "·W_O: the attention output", "ko": "·W_O: 어텐션 출력"},
    "chain.w_o_b": {"en": "·W_O + b_O: the attention output", "ko": "·W_O + b_O: 어텐션 출력"},
    "chain.add_norm_attn": {"en": "add & norm: LayerNorm(X + attention)", "ko": "잔차 연결과 정규화: LayerNorm(X + 어텐션)"},
    "chain.add_norm_cross": {"en": "add & norm: LayerNorm(Y + cross-attention)",
                             "ko": "잔차 연결과 정규화: LayerNorm(Y + 크로스 어텐션)"},
    "chain.cross_sublayer": {"en": "cross-attention sublayer (keys, values: the encoder's output H), add & norm",
                             "ko": "크로스 어텐션 서브레이어 (키, 밸류: 인코더 출력 H), 잔차 연결과 정규화"},
    "chain.add": {"en": "add: X + attention (not normalised)", "ko": "잔차 연결: X + 어텐션 (정규화 안 함)"},
    "chain.rmsnorm_ffn": {"en": "RMSNorm: what the feed-forward reads", "ko": "RMSNorm: 피드포워드가 읽는 것"},
    "chain.ffn_hidden": {"en": "feed-forward hidden layer ({act})", "ko": "피드포워드 은닉층 ({act})"},
    "chain.ffn_out": {"en": "feed-forward output", "ko": "피드포워드 출력"},
    "chain.add_norm_ffn": {"en": "add & norm: the output of layer {layer}", "ko": "잔차 연결과 정규화: {layer}번 레이어의 출력"},
    "chain.add_ffn": {"en": "add: the output of layer {layer}", "ko": "잔차 연결: {layer}번 레이어의 출력"},
    "chain.later_layers": {"en": "{n} later layer(s): the same steps", "ko": "뒤의 레이어 {n}개: 같은 단계"},
    "chain.feeds_cross": {"en": "H, the encoder's output: keys and values of the cross-attention in all {n} decoder layers",
                          "ko": "인코더 출력 H: 디코더 레이어 {n}개 모두의 크로스 어텐션의 키와 밸류"},
    "chain.final_norm": {"en": "final RMSNorm", "ko": "마지막 RMSNorm"},
    "chain.logits": {"en": "output layer: logits over the vocabulary, then softmax",
                     "ko": "출력 레이어: 어휘 전체의 로짓, 그다음 소프트맥스"},
    "tx.decoder_input": {"en": "decoder input", "ko": "디코더 입력"},
    "tx.predicts": {"en": "predicts", "ko": "예측"},
    "tx.text": {"en": "text", "ko": "글"},
    "tx.rotated": {"en": "no positional vector: q, k are rotated in every layer",
                   "ko": "위치 벡터 없음: 레이어마다 q, k를 회전"},
    "tx.trained": {"en": "trained, no formula", "ko": "학습됨, 공식 없음"},
    "tx.base": {"en": "base", "ko": "밑"},
    "tx.every_n": {"en": "whatever n", "ko": "n과 상관없이"},
    "tx.no_bias": {"en": "no bias", "ko": "편향 없음"},
    "tx.encoder_output": {"en": "encoder output", "ko": "인코더 출력"},
    "tx.padding": {"en": "padding", "ko": "패딩"},
    "tx.causal": {"en": "causal", "ko": "인과"},
    "tx.padding_source": {"en": "padding of the source", "ko": "원문의 패딩"},
    "tx.no_causal": {"en": "no causal mask", "ko": "인과 마스크 없음"},
    "tx.otherwise": {"en": "otherwise", "ko": "그 외"},
    "tx.edited": {"en": "edited", "ko": "바꾼 뒤"},
    "tx.intact": {"en": "intact", "ko": "원래"},
    "tx.tied": {"en": "tied", "ko": "공유"},
    "tx.view": {"en": "view", "ko": "모양 바꾸기"},
    "tx.transpose": {"en": "transpose", "ko": "전치"},
    "tx.mask": {"en": "mask", "ko": "마스크"},
    "tx.softmax": {"en": "softmax", "ko": "소프트맥스"},
    "fig.softmax": {"en": "softmax", "ko": "소프트맥스"},
    "fig.d_ff": {"en": "d_ff", "ko": "d_ff"},
    "fig.ffn_hidden": {"en": "hidden activation", "ko": "은닉 활성값"},
    "fig.ffn_out": {"en": "feed-forward output", "ko": "피드포워드 출력"},
    "fig.norm_stats": {"en": "each norm's input, per position", "ko": "위치별 정규화 입력의 통계"},
    "fig.stat_mean": {"en": "mean μ", "ko": "평균 μ"},
    "fig.stat_std": {"en": "standard deviation σ", "ko": "표준편차 σ"},
    "fig.stat_rms": {"en": "root mean square", "ko": "제곱평균제곱근"},
    "fig.decoder_input": {"en": "decoder input", "ko": "디코더 입력"},
    "fig.chosen": {"en": "written", "ko": "쓴 토큰"},
    "fig.step": {"en": "step", "ko": "단계"},
    "fig.shape": {"en": "shape", "ko": "형태"},
    "fig.hook": {"en": "hook", "ko": "훅"},
    "stage.shapes.title": {
        "en": "Shapes: the tensors, step by step",
        "ko": "형태: 단계별 텐서"},
    "stage.shapes.explain": {
        "en": "Every tensor on the way through layer {layer}, with its real shape for this batch. The attention "
              "block is highlighted: one projection makes all heads at once (… × heads·d_k), a view and a "
              "transpose split it into heads (batch × heads × positions × d_k), and after A·V the heads are "
              "concatenated back (transpose, then view) before W_O.",
        "ko": "{layer}번 레이어를 지나는 모든 텐서와, 이 배치에서의 실제 형태입니다. 어텐션 블록은 강조했습니다: 투영 "
              "한 번으로 모든 헤드를 한꺼번에 만들고(… × 헤드·d_k), 모양 바꾸기와 전치로 헤드를 나누며(배치 × 헤드 × "
              "위치 × d_k), A·V 뒤에는 W_O 앞에서 헤드를 다시 이어 붙입니다(전치 후 모양 바꾸기)."},
    "stage.ffn.title": {
        "en": "Feed-forward network",
        "ko": "피드포워드 네트워크"},
    "stage.ffn.explain.relu": {
        "en": "After attention every position goes through the same two-layer network on its own (no position "
              "reads another): {resize}, ReLU, back to d_model. Its "
              "input is {input}. ReLU zeroes the negative part: {zero}% of the hidden values are exactly 0 here "
              "(layer {layer}).",
        "ko": "어텐션 다음에는 모든 위치가 같은 2층 네트워크를 각자 통과합니다 (다른 위치를 읽지 않음): {resize}, "
              "ReLU를 거쳐, 다시 d_model로 돌아옵니다. 입력은 "
              "{input}입니다. ReLU는 음수를 0으로 만듭니다: 여기서({layer}번 레이어) 은닉값의 {zero}%가 정확히 "
              "0입니다."},
    "stage.ffn.explain.gelu": {
        "en": "After attention every position goes through the same two-layer network on its own (no position "
              "reads another): {resize}, {act} (a smooth ReLU: "
              "small negative values pass, damped), back to d_model. Its input is {input}. Here (layer "
              "{layer}) {neg}% of the hidden values are negative.",
        "ko": "어텐션 다음에는 모든 위치가 같은 2층 네트워크를 각자 통과합니다 (다른 위치를 읽지 않음): {resize}, "
              "{act}(부드러운 ReLU: 작은 음수는 줄어든 채 통과)를 거쳐, 다시 d_model로 돌아옵니다. 입력은 {input}입니다. 여기서({layer}번 레이어) 은닉값의 {neg}%가 "
              "음수입니다."},
    "stage.ffn.explain.swiglu": {
        "en": "After attention every position goes through the same network on its own (no position reads "
              "another): two projections from d_model = {d} to d_ff = {d_ff}, one through SiLU acting as a gate "
              "on the other (element by element), then W_down back to d_model. No biases. Its input is "
              "{input}. Here (layer {layer}) {neg}% of the hidden values are negative.",
        "ko": "어텐션 다음에는 모든 위치가 같은 네트워크를 각자 통과합니다 (다른 위치를 읽지 않음): d_model = {d}에서 "
              "d_ff = {d_ff}로 가는 투영 두 개 중 하나가 SiLU를 거쳐 다른 하나의 게이트가 되고(성분별 곱), W_down으로 "
              "다시 d_model로 줄입니다. 편향은 없습니다. 입력은 {input}입니다. 여기서({layer}번 레이어) 은닉값의 "
              "{neg}%가 음수입니다."},
    "stage.residual_norm.title": {
        "en": "Residual connections and norms",
        "ko": "잔차 연결과 정규화"},
    "stage.residual_norm.explain.post_ln": {
        "en": "Each sublayer adds its output to the stream it read (the residual connection), and a LayerNorm "
              "normalises the sum (post-LN, as in the paper): per position, subtract the mean μ, divide by the "
              "standard deviation σ, then scale by γ and shift by β (both learned). The panels follow layer "
              "{layer} in order; the bottom plot shows μ and σ of each norm's input per position. {extra}",
        "ko": "각 서브레이어는 읽은 스트림에 자기 출력을 더하고(잔차 연결), LayerNorm이 그 합을 정규화합니다 (논문처럼 "
              "뒤에서 정규화, post-LN): 위치마다 평균 μ를 빼고 표준편차 σ로 나눈 뒤, 학습된 γ를 곱하고 β를 더합니다. "
              "그림은 {layer}번 레이어를 순서대로 따라가고, 아래 그래프는 각 정규화 입력의 위치별 μ와 σ입니다. {extra}"},
    "stage.residual_norm.explain.pre_rms": {
        "en": "This model normalises before each sublayer instead (pre-norm): the sublayer reads RMSNorm(x), "
              "and its output is added to the stream x itself, which is never normalised on its way through "
              "the blocks. RMSNorm divides each position by its root mean square (no mean subtracted, no shift) "
              "and scales by γ. The panels follow layer {layer} in order; the bottom plot shows each norm "
              "input's root mean square per position. {extra}",
        "ko": "이 모델은 반대로 각 서브레이어 앞에서 정규화합니다 (pre-norm): 서브레이어는 RMSNorm(x)를 읽고, 그 "
              "출력은 스트림 x 자체에 더해집니다. 스트림 자체는 블록들을 지나는 동안 정규화되지 않습니다. RMSNorm은 "
              "위치마다 제곱평균제곱근으로 나누고(평균을 빼지도, 더하지도 않음) γ를 곱합니다. 그림은 {layer}번 "
              "레이어를 순서대로 따라가고, 아래 그래프는 각 정규화 입력의 위치별 제곱평균제곱근입니다. {extra}"},
    "stage.logits.title": {
        "en": "The generator: next-token probabilities",
        "ko": "생성기: 다음 토큰의 확률"},
    "stage.logits.explain": {
        "en": "The last decoder layer's stream h_t (layer {last}) through the model's readout ({readout}) "
              "gives one score per token of the vocabulary ({V}); softmax turns "
              "them into probabilities. Each row is one decoder position, labelled by the token it reads; the "
              "cells are the {k} most likely next tokens, and the outlined one is what the model wrote "
              "(greedy: the most likely). All rows come from one teacher-forced pass over {start} + what the model "
              "wrote, shifted right: row t reads the tokens up to t and predicts token t + 1.",
        "ko": "마지막 디코더 레이어({last}번)의 스트림 h_t를 모델의 출력 단계({readout})로 읽으면 "
              "어휘({V}개)의 토큰마다 점수가 하나씩 나오고, 소프트맥스가 이를 확률로 바꿉니다. 각 행은 디코더 "
              "위치 하나이며 그 위치가 읽는 토큰으로 표시했습니다. 칸은 가능성이 가장 높은 다음 토큰 {k}개이고, 테두리를 "
              "친 것이 모델이 쓴 토큰입니다 (그리디: 가장 높은 것). 모든 행은 {start} + 모델이 쓴 것을 오른쪽으로 한 칸 민 "
              "입력을 한 번에 통과시킨 결과(티처 포싱)입니다: t번 행은 t까지의 토큰을 읽고 t + 1번 토큰을 예측합니다."},
    "stage.pe_tutorial.title": {
        "en": "Tutorial 002, reproduced: d_model = 4, ten positions",
        "ko": "튜토리얼 002 재현: d_model = 4, 위치 10개"},
    "stage.pe_tutorial.explain": {
        "en": "The worked example of tutorial 002: a 4-dimensional embedding, ten positions, div_term = "
              "1/n^(2i/d_model) for n = 100, 1000 and 10000 (its values are in the subtitle), the encodings, and "
              "the tutorial's three sentences' embedding + encoding (dropout 0), to two decimals as the tutorial "
              "prints them. With d_model = 4 there are only two frequencies: the first pair turns 1 radian per "
              "position for every n, the second 1/√n: 0.10 for n = 100, 0.01 for n = 10000, almost constant over "
              "ten positions. (The tutorial's embedding is random and printed to two decimals; the vectors used "
              "here reproduce all of its printed tables.)",
        "ko": "튜토리얼 002의 예제입니다: 4차원 임베딩, 위치 10개, n = 100, 1000, 10000의 div_term = "
              "1/n^(2i/d_model) (값은 부제목), 위치 인코딩, 그리고 튜토리얼의 세 문장의 임베딩 + 위치 인코딩(드롭아웃 "
              "0)을 튜토리얼처럼 소수 둘째 자리까지 보여 줍니다. d_model = 4이면 주파수는 두 개뿐입니다: 첫 번째 쌍은 "
              "n과 상관없이 위치마다 1라디안, 두 번째 쌍은 1/√n만큼 돕니다 (n = 100이면 0.10, n = 10000이면 0.01로 "
              "위치 10개 동안 거의 변하지 않음). (튜토리얼의 임베딩은 무작위이고 소수 둘째 자리까지만 출력되어 있어, 여기서는 "
              "출력된 모든 표를 그대로 재현하는 벡터를 씁니다.)"},
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
        "en": "a decoder that writes text (seed, seed-sort, smollm2, gemma3)",
        "ko": "글을 쓰는 디코더가 있는 (seed, seed-sort, smollm2, gemma3)"},
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
        "en": "The consequence for what the model produces — the text an encoder–decoder writes, a decoder's "
              "next-token probabilities, an encoder's sentence embedding — intact (①) and edited (②).",
        "ko": "모델이 내놓는 결과가 어떻게 달라지는지 봅니다 — 인코더–디코더가 쓴 글, 디코더의 다음 토큰 "
              "확률, 인코더의 문장 임베딩 — 원래(①)와 편집(②)."},
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
    # --- presenter mode (issue 16, item 3: explorer/presenter.py) ---
    "present.toggle": {
        "en": "Presenter mode",
        "ko": "발표자 모드"},
    "present.help": {
        "en": "Large type and figures for a projector, the sidebar folded away, and a QR code of this "
              "view (without presenter mode) for the room to open on their own devices.",
        "ko": "프로젝터용으로 글자와 그림을 크게 하고 사이드바를 접으며, 이 화면(발표자 모드 없이)의 "
              "QR 코드를 보여 주어 청중이 자기 기기에서 같은 화면을 열 수 있게 합니다."},
    "present.share": {
        "en": "QR code of this view",
        "ko": "이 화면의 QR 코드"},
    "present.scan": {
        "en": "Scan to open this view",
        "ko": "스캔하면 이 화면이 열립니다"},
    "present.too_long": {
        "en": "This view's address ({n} characters) is too long for a QR code: shorten the sentences, or share the address shown here.",
        "ko": "이 화면의 주소({n}자)는 QR 코드에 담기에는 너무 깁니다. 문장을 줄이거나 여기 보이는 주소를 공유하세요."},

    # --- lessons (issue 16): the Lessons page, its lessons, questions and handout -----------------
    "nav.explorer": {"en": "Every stage", "ko": "모든 단계"},
    "nav.lessons": {"en": "Lessons", "ko": "레슨"},
    "lessons.title": {"en": "Lessons: a path through the Transformer", "ko": "레슨: 트랜스포머를 따라가는 길"},
    "lessons.tagline": {
        "en": "{n} short lessons on live runs of the models: read, look, predict, then reveal. Edit the sentence and the figures and the answer follow it.",
        "ko": "모델을 실제로 실행하며 배우는 짧은 레슨 {n}개입니다. 읽고, 보고, 예측한 다음 정답을 확인하세요. 문장을 고치면 그림과 정답도 함께 바뀝니다."},
    "lessons.pick": {"en": "Lesson", "ko": "레슨"},
    "lessons.heading": {"en": "Lesson {n}: {title}", "ko": "레슨 {n}: {title}"},
    "lessons.progress": {"en": "Answered: {done} of {n} (right: {right})", "ko": "답한 레슨: {n}개 중 {done}개 (정답 {right}개)"},
    "lessons.sentences": {"en": "Sentences (one per line; edit them and the lesson follows)",
                          "ko": "문장 (한 줄에 하나씩, 고치면 레슨도 따라 바뀝니다)"},
    "lessons.default_text": {"en": "Back to the lesson's sentence", "ko": "레슨의 원래 문장으로"},
    "lessons.empty": {"en": "Type a sentence to run the lesson.", "ko": "레슨을 실행하려면 문장을 입력하세요."},
    "lessons.part": {"en": "Model: {model}", "ko": "모델: {model}"},
    "lessons.question": {"en": "Predict, then reveal", "ko": "예측한 다음 확인하기"},
    "lessons.guess": {"en": "Your prediction", "ko": "내 예측"},
    "lessons.reveal": {"en": "Reveal the answer", "ko": "정답 보기"},
    "lessons.need_guess": {"en": "Make a prediction first.", "ko": "먼저 예측을 고르세요."},
    "lessons.right": {"en": "Right: {answer}", "ko": "정답입니다: {answer}"},
    "lessons.wrong": {"en": "Not this time: you said {guess}, the run says {answer}", "ko": "이번에는 아닙니다. 내 예측은 {guess}, 실행 결과는 {answer}입니다"},
    "lessons.again": {"en": "Try again", "ko": "다시 풀기"},
    "lessons.after_reveal": {"en": "This figure would give the answer away: it appears once the answer is revealed.",
                             "ko": "이 그림은 정답을 알려 주므로 정답을 확인한 뒤에 나타납니다."},
    "lessons.bad_lesson": {"en": "There is no lesson “{value}” (lessons 1 to {n}): showing lesson 1.",
                           "ko": "없는 레슨입니다: “{value}” (레슨은 1~{n}). 레슨 1을 보여 줍니다."},
    "lessons.model_missing": {
        "en": "{model} could not be loaded here (log id `{id}`; the server's log has the details). If its weights are not "
              "on this machine, fetch them with `python -m model.fetch {model}` and reload.",
        "ko": "{model} 모델을 여기서 불러오지 못했습니다 (로그 번호 `{id}`, 자세한 내용은 서버 로그에 있습니다). 가중치가 이 컴퓨터에 "
              "없다면 `python -m model.fetch {model}` 명령으로 받은 다음 다시 불러오세요."},
    "lessons.no_question": {"en": "The question needs {model}, which could not run here.",
                            "ko": "이 질문에는 {model} 모델이 필요한데 여기서 실행할 수 없습니다."},
    "lessons.prev": {"en": "← Previous lesson", "ko": "← 이전 레슨"},
    "lessons.next": {"en": "Next lesson →", "ko": "다음 레슨 →"},
    "lessons.handout": {"en": "Handout (PDF)", "ko": "유인물 (PDF)"},
    "lessons.handout_help": {"en": "This lesson's text, figures and question; the answer on the last page. Made when clicked (a few seconds).",
                             "ko": "이 레슨의 글, 그림, 질문을 담고 정답은 마지막 쪽에 둡니다. 누르면 그때 만듭니다 (몇 초 걸립니다)."},
    "lessons.handout_unavailable": {"en": "The handout needs chromium: {reason}", "ko": "유인물을 만들려면 chromium이 필요합니다: {reason}"},
    "lessons.sentence_line": {"en": "Sentences: {text}", "ko": "문장: {text}"},
    "lessons.answers_page": {"en": "Answers", "ko": "정답"},
    "lessons.answer_line": {"en": "Answer: {answer}", "ko": "정답: {answer}"},
    "lessons.number_line": {"en": "Answer with a number.", "ko": "숫자로 답하세요."},
    "lessons.page_of": {"en": "Attention Explorer · lesson {n} · page {p} of {total}", "ko": "Attention Explorer · 레슨 {n} · {total}쪽 중 {p}쪽"},
    "lesson.1.title": {"en": "Tokens and the padded batch", "ko": "토큰과 패딩된 배치"},
    "lesson.1.text": {
        "en": "A model never reads letters or words: it reads **tokens**, each one an id in its vocabulary. The seed model cuts text into characters and ends every sentence with `</s>`. To run several sentences at once they are stacked into one tensor, so the shorter ones are filled up with **padding** to the longest one's length. Padding is only a filler: later, the padding mask makes sure no query attends to it.",
        "ko": "모델은 글자나 단어를 직접 읽지 않고 **토큰**을 읽습니다. 토큰마다 어휘 사전의 번호(id)가 있습니다. seed 모델은 글을 문자 단위로 자르고 문장 끝에 `</s>`를 붙입니다. 여러 문장을 한 번에 처리하려면 하나의 텐서로 쌓아야 하므로, 짧은 문장은 가장 긴 문장의 길이까지 **패딩**으로 채웁니다. 패딩은 자리만 채울 뿐이며, 뒤에서 패딩 마스크가 어떤 쿼리도 패딩을 보지 않게 합니다."},
    "lesson.1.ask": {"en": "In the padded batch, how many pad positions does sentence {s} (“{text}”) get?",
                     "ko": "패딩된 배치에서 문장 {s} (“{text}”)에는 패딩 자리가 몇 개 생길까요?"},
    "lesson.1.why": {"en": "The batch is {t} positions wide (the longest sentence's length, its end token included); sentence {s} has {n} tokens, so {p} positions are padding.",
                     "ko": "배치의 길이는 {t}자리입니다 (가장 긴 문장의 길이, 끝 토큰 포함). 문장 {s}의 토큰은 {n}개이므로 {p}자리가 패딩입니다."},
    "lesson.2.title": {"en": "Embedding × √d_model and the sinusoidal encoding", "ko": "임베딩 × √d_model과 사인파 위치 인코딩"},
    "lesson.2.text": {
        "en": "Each token id becomes a vector of d_model numbers (its **embedding**). The seed model, as in the paper, multiplies it by √d_model so that the positional encoding added next does not drown it (MiniLM and SmolLM2 do not scale it). Attention itself has no idea of order, so a **positional encoding** is added: for position k and dimension pair i, sin(k / n^(2i/d_model)) and cos(k / n^(2i/d_model)). The first dimensions wave fast, the last ones slowly, so every position gets its own pattern and nearby positions get similar ones. At the end: tutorial 002's example (d_model 4, n = 100 against n = 10000), with its numbers.",
        "ko": "토큰 id는 d_model개의 숫자로 된 벡터(**임베딩**)가 됩니다. seed 모델은 논문처럼 여기에 √d_model을 곱해, 뒤에 더해지는 위치 인코딩에 임베딩이 묻히지 않게 합니다 (MiniLM과 SmolLM2는 곱하지 않습니다). 어텐션 자체는 순서를 모르기 때문에 **위치 인코딩**을 더합니다. 위치 k, 차원 쌍 i의 값은 sin(k / n^(2i/d_model))과 cos(k / n^(2i/d_model))입니다. 앞쪽 차원은 빠르게, 뒤쪽 차원은 천천히 진동하므로 위치마다 고유한 무늬가 생기고 가까운 위치끼리는 비슷한 무늬를 갖습니다. 마지막은 튜토리얼 002의 예제(d_model 4, n = 100과 n = 10000 비교)와 그 숫자들입니다."},
    "lesson.2.ask": {
        "en": "Which position (1 to {n}) has the encoding most similar to position 0's, by cosine similarity?",
        "ko": "위치 1~{n} 가운데 위치 0의 인코딩과 가장 비슷한(코사인 유사도 기준) 위치는 어디일까요?"},
    "lesson.2.why": {
        "en": "Position {k}: cos = {cos}. The slow dimensions barely change between neighbours; the last position ({last}) is at cos = {cos_last}. This model's base is n = {base} (the paper's: 10000).",
        "ko": "위치 {k}: cos = {cos}. 느린 차원은 이웃한 위치 사이에서 거의 변하지 않습니다. 마지막 위치({last})는 cos = {cos_last}입니다. 이 모델의 밑은 n = {base}입니다 (논문은 10000)."},
    "lesson.3.title": {"en": "Query, key, value and the head split", "ko": "쿼리, 키, 밸류와 헤드 나누기"},
    "lesson.3.text": {
        "en": "Three learned matrices turn every token's vector into a **query** (what it looks for), a **key** (what it offers) and a **value** (what it passes on): Q = X·W_Q, K = X·W_K, V = X·W_V. Multi-head attention does not make h separate projections: it cuts the d_model columns of Q, K and V into h heads of d_k = d_model / h columns each, and every head attends on its own.",
        "ko": "학습된 세 행렬이 토큰 벡터마다 **쿼리**(무엇을 찾는지), **키**(무엇을 내놓는지), **밸류**(무엇을 전달하는지)를 만듭니다: Q = X·W_Q, K = X·W_K, V = X·W_V. 멀티 헤드 어텐션은 투영을 h번 따로 하지 않고, Q, K, V의 d_model개 열을 d_k = d_model / h 열씩 h개의 헤드로 나눕니다. 각 헤드는 따로 어텐션을 계산합니다."},
    "lesson.3.ask": {"en": "This model has d_model = {d} and {h} heads. How many numbers make up one head's query vector for one token (d_k)?",
                     "ko": "이 모델은 d_model = {d}, 헤드 {h}개입니다. 한 토큰에 대한 한 헤드의 쿼리 벡터는 숫자 몇 개로 이루어질까요 (d_k)?"},
    "lesson.3.why": {"en": "{d} / {h} = {k}: the query hook holds {shape} (batch × heads × positions × d_k).",
                     "ko": "{d} / {h} = {k}: 쿼리 훅의 모양은 {shape}입니다 (배치 × 헤드 × 위치 × d_k)."},
    "lesson.4.title": {"en": "Scores and the scaling by √d_k", "ko": "점수와 √d_k 스케일링"},
    "lesson.4.text": {
        "en": "Each query is compared with every key by a dot product: the **scores** Q·Kᵀ, one row per query. The dot product of two vectors of d_k numbers spreads wider as d_k grows (for random numbers of variance 1, its variance is d_k), and softmax of widely spread scores puts almost all the weight on one key, where gradients vanish. So the scores are divided by √d_k. The last figure is a what-if: the same sentence with the scaling switched off in every layer.",
        "ko": "각 쿼리는 모든 키와 내적으로 비교됩니다. 이것이 **점수** Q·Kᵀ이며 쿼리마다 한 행입니다. d_k개 숫자로 된 두 벡터의 내적은 d_k가 클수록 넓게 퍼지고 (분산이 1인 무작위 숫자라면 내적의 분산은 d_k입니다), 넓게 퍼진 점수에 소프트맥스를 하면 거의 모든 가중치가 한 키에 몰려 기울기가 사라집니다. 그래서 점수를 √d_k로 나눕니다 (스케일링). 마지막 그림은 바꿔 보기입니다: 같은 문장을 모든 레이어에서 스케일링 없이 실행한 결과입니다."},
    "lesson.4.ask": {
        "en": "Layer {l}, head {h}: without ÷√d_k, what happens to the largest weight in row {q}?",
        "ko": "레이어 {l}, 헤드 {h}: √d_k로 나누지 않으면 {q}행의 가장 큰 가중치는 어떻게 될까요?"},
    "lesson.4.larger": {
        "en": "it gets larger",
        "ko": "커집니다"},
    "lesson.4.smaller": {
        "en": "it gets smaller",
        "ko": "작아집니다"},
    "lesson.4.same": {
        "en": "it stays the same",
        "ko": "그대로입니다"},
    "lesson.4.why": {
        "en": "Scaled: {a}; not scaled: {b}. Without ÷√d_k the spread of row {q}'s scores (largest − smallest) is {r} times wider. √d_k = {s}, but the spread grows by exactly that only where a layer's input is unchanged (encoder layer 0): every layer ran unscaled, so later layers read other inputs. A wider spread makes softmax sharper.",
        "ko": "스케일링 있음: {a}, 없음: {b}. √d_k로 나누지 않으면 {q}행 점수의 폭(최댓값 − 최솟값)이 {r}배가 됩니다. √d_k = {s}이지만, 폭이 정확히 그만큼 커지는 것은 입력이 그대로인 레이어(인코더 레이어 0)뿐입니다. 모든 레이어에서 스케일링을 껐으므로 그 뒤 레이어는 다른 입력을 읽습니다. 점수의 폭이 넓을수록 소프트맥스가 뾰족해집니다."},
    "lesson.5.title": {"en": "The padding mask and the subsequent (causal) mask", "ko": "패딩 마스크와 서브시퀀트(인과) 마스크"},
    "lesson.5.text": {
        "en": "Two masks decide which keys a query may not see. The **padding mask** hides the pad positions of a shorter sentence; it is the only mask of the encoder's self-attention and of cross-attention. In the decoder's self-attention the **subsequent (causal) mask** also hides every later position, so that a position cannot peek at the token it must predict: there the mask is padding ∧ causal. A hidden score becomes −∞, and e^−∞ = 0: its weight is exactly 0 (tutorials 000 and 003 fill in −1e9 and −1e10, which in float32 give weights of exactly 0 too; tutorial 004 uses −∞ like the app). The last figure is a what-if: the same sentences run without the causal mask (which can also change what the decoder writes).",
        "ko": "쿼리가 보면 안 되는 키는 두 마스크로 정합니다. **패딩 마스크**는 짧은 문장의 패딩 자리를 가리며, 인코더 셀프 어텐션과 크로스 어텐션에는 이 마스크만 쓰입니다. 디코더 셀프 어텐션에서는 **서브시퀀트(인과) 마스크**가 뒤쪽 위치도 모두 가려, 예측해야 할 토큰을 미리 보지 못하게 합니다. 그래서 디코더 셀프 어텐션의 마스크는 패딩 ∧ 인과입니다. 가려진 점수는 −∞가 되고 e^−∞ = 0이므로 그 가중치는 정확히 0입니다 (튜토리얼 000과 003은 −1e9와 −1e10을 채우는데, 32비트 부동소수점에서는 이때도 가중치가 정확히 0이 됩니다. 튜토리얼 004는 앱처럼 −∞를 씁니다). 마지막 그림은 바꿔 보기입니다: 같은 문장을 인과 마스크 없이 실행한 결과입니다 (디코더가 쓰는 글도 달라질 수 있습니다)."},
    "lesson.5.ask": {"en": "Decoder self-attention, sentence {s}, row {q}: how many of its {t} weights are exactly 0?",
                     "ko": "디코더 셀프 어텐션, 문장 {s}의 {q}행: {t}개의 가중치 중 정확히 0인 것은 몇 개일까요?"},
    "lesson.5.why": {
        "en": "{z} of {t} are 0. The causal mask hides the {c} keys after position {q}; the {p} pad keys are among them, since padding comes after the last real token.",
        "ko": "{t}개 중 {z}개가 0입니다. 인과 마스크가 위치 {q} 뒤의 키 {c}개를 가리고, 패딩 키 {p}개도 그 안에 있습니다. 패딩은 실제 마지막 토큰 뒤에 오기 때문입니다."},
    "lesson.6.title": {"en": "Softmax and the weighted sum of values", "ko": "소프트맥스와 밸류의 가중합"},
    "lesson.6.text": {
        "en": "**Softmax** turns each row of scaled scores into weights between 0 and 1 that sum to 1. Each query's output is then the weighted sum of the value vectors: the keys with large weights pass on most of their value. This is the whole of attention: softmax(Q·Kᵀ/√d_k)·V.",
        "ko": "**소프트맥스**는 스케일링된 점수의 각 행을 0과 1 사이이면서 합이 1인 가중치로 바꿉니다. 각 쿼리의 출력은 밸류 벡터들의 가중합이며, 가중치가 큰 키일수록 자기 밸류를 많이 전달합니다. 어텐션은 이것이 전부입니다: softmax(Q·Kᵀ/√d_k)·V."},
    "lesson.6.ask": {
        "en": "Layer {l}, head {h}: which key will query {q} weigh most?",
        "ko": "레이어 {l}, 헤드 {h}: 쿼리 {q}의 행에서 가중치가 가장 큰 키는 무엇일까요?"},
    "lesson.6.why": {
        "en": "A[{q}, {j}] = {w}, the largest in the row; the row sums to {sum}.",
        "ko": "A[{q}, {j}] = {w}: 그 행에서 가장 큰 값입니다. 행의 합은 {sum}입니다."},
    "lesson.7.title": {"en": "Many heads, and all of them at once", "ko": "여러 헤드, 그리고 모든 헤드 한눈에"},
    "lesson.7.text": {
        "en": "Every head computes its own pattern, and the heads' outputs are concatenated and mixed by W_O. Heads can specialise: some look at the previous or the next token, some spread their attention widely. The overview shows every layer × head at once, with each head's **entropy** (how spread out its rows are) and mean attention distance.",
        "ko": "헤드마다 자기 패턴을 계산하고, 헤드들의 출력을 이어 붙인 뒤 W_O로 섞습니다. 헤드는 역할이 나뉠 수 있습니다. 이전이나 다음 토큰을 보는 헤드도 있고, 넓게 퍼져서 보는 헤드도 있습니다. 개요 그림은 모든 레이어 × 헤드를 한 번에 보여 주며, 헤드마다 **엔트로피**(행이 얼마나 퍼져 있는지)와 평균 어텐션 거리를 함께 보여 줍니다."},
    "lesson.7.ask": {"en": "Which head of layer {l} spreads its attention most (the highest mean entropy over the real queries)?",
                     "ko": "레이어 {l}에서 어텐션을 가장 넓게 퍼뜨리는 헤드(실제 쿼리들의 평균 엔트로피가 가장 큰 헤드)는 무엇일까요?"},
    "lesson.7.why": {
        "en": "H{h}: {e} nats, the highest (mean over {n} queries). All heads: {all}.",
        "ko": "H{h}: {e}내트로 가장 큽니다 (쿼리 {n}개의 평균). 모든 헤드: {all}."},
    "lesson.8.title": {"en": "The whole block: feed-forward, residual, LayerNorm", "ko": "블록 전체: 피드포워드, 잔차 연결, 레이어 정규화"},
    "lesson.8.text": {
        "en": "Attention is one sublayer of a block. The second is a position-wise **feed-forward** network: two linear layers with a ReLU between them, applied to each token on its own. Around each sublayer, a **residual** connection adds the input back (x + sublayer(x)) and **LayerNorm** normalises the sum. Shapes stay (batch, positions, d_model) from the block's input to its output, so blocks stack. This is the seed model's block, as in the paper; BERT models such as MiniLM use GELU instead of ReLU, and Llama models such as SmolLM2 normalise before each sublayer (RMSNorm) and use a gated feed-forward (SwiGLU).",
        "ko": "어텐션은 블록의 한 서브레이어입니다. 두 번째 서브레이어는 위치별 **피드포워드** 네트워크로, 두 선형 레이어 사이에 ReLU가 있으며 토큰마다 따로 적용됩니다. 각 서브레이어 주위에서 **잔차 연결**이 입력을 다시 더하고 (x + sublayer(x)) **레이어 정규화**(LayerNorm)가 그 합을 정규화합니다. 블록의 입력부터 출력까지 모양이 (배치, 위치, d_model)로 유지되므로 블록을 쌓을 수 있습니다. 이것은 논문과 같은 seed 모델의 블록입니다. MiniLM 같은 BERT 모델은 ReLU 대신 GELU를 쓰고, SmolLM2 같은 Llama 모델은 각 서브레이어 앞에서 정규화하며(RMSNorm) 게이트가 있는 피드포워드(SwiGLU)를 씁니다."},
    "lesson.8.ask": {
        "en": "In encoder layer {l}'s feed-forward, what share of token 0's {d} hidden values does ReLU set to exactly 0?",
        "ko": "인코더 레이어 {l}의 피드포워드에서 토큰 0의 은닉값 {d}개 중 ReLU가 정확히 0으로 만드는 비율은 얼마일까요?"},
    "lesson.8.bin0": {"en": "less than a quarter", "ko": "4분의 1 미만"},
    "lesson.8.bin1": {"en": "a quarter to a half", "ko": "4분의 1 ~ 2분의 1"},
    "lesson.8.bin2": {"en": "a half to three quarters", "ko": "2분의 1 ~ 4분의 3"},
    "lesson.8.bin3": {"en": "three quarters or more", "ko": "4분의 3 이상"},
    "lesson.8.why": {"en": "{z} of {d} values ({pct}%) are 0: ReLU turns every negative value into 0.",
                     "ko": "{d}개 중 {z}개({pct}%)가 0입니다. ReLU는 음수를 모두 0으로 만듭니다."},
    "lesson.9.title": {"en": "Encoder–decoder and cross-attention", "ko": "인코더–디코더와 크로스 어텐션"},
    "lesson.9.text": {
        "en": "In the encoder–decoder, the decoder's queries also attend to the encoder's output: **cross-attention**, with queries from the decoder and keys and values from the encoder. The seed model was trained to reverse its input, so to write its first character it must read the input's last one (before </s>): the pattern should be an anti-diagonal. The sort model writes the input's distinct letters in alphabetical order, so its cross-attention jumps to wherever the next letter is.",
        "ko": "인코더–디코더에서는 디코더의 쿼리가 인코더의 출력에도 어텐션합니다. 이것이 **크로스 어텐션**으로, 쿼리는 디코더에서, 키와 밸류는 인코더에서 옵니다. seed 모델은 입력을 뒤집도록 학습되었으므로 첫 글자를 쓰려면 입력의 마지막 글자(</s> 앞)를 읽어야 합니다. 그래서 패턴은 반대각선이 될 것입니다. 정렬 모델은 입력의 서로 다른 글자를 알파벳 순서로 쓰므로, 크로스 어텐션이 다음 글자가 있는 곳으로 건너뜁니다."},
    "lesson.9.sort": {"en": "The sort model (seed-sort) on the same sentence: its cross-attention follows the letters' alphabetical order, not their positions.",
                      "ko": "같은 문장에 대한 정렬 모델(seed-sort): 크로스 어텐션이 위치가 아니라 글자의 알파벳 순서를 따라갑니다."},
    "lesson.9.ask": {"en": "Cross-attention, layer {l}, head {h}: when the decoder writes its first character (row 0, <s>), which input token will it weigh most?",
                     "ko": "크로스 어텐션, 레이어 {l}, 헤드 {h}: 디코더가 첫 글자를 쓸 때 (0행, <s>) 어떤 입력 토큰에 가장 큰 가중치를 줄까요?"},
    "lesson.9.why": {"en": "Input token {j}, with weight {w}; the model wrote “{first}” first (the whole output: “{out}”).",
                     "ko": "입력 토큰 {j}, 가중치 {w}입니다. 모델이 처음 쓴 글자는 “{first}”입니다 (전체 출력: “{out}”)."},
    "lesson.10.title": {"en": "Decoding step by step, with the cache", "ko": "한 단계씩 디코딩하기와 캐시"},
    "lesson.10.text": {
        "en": "At inference the decoder writes one token at a time: it reads what it has written so far, chooses the most likely next token (greedy decoding), appends it and runs again. The keys and values of earlier positions never change, so they are kept in a **key/value cache** and each step computes only the new row. In training, by contrast, teacher forcing runs every position at once behind the causal mask.",
        "ko": "추론할 때 디코더는 한 번에 토큰 하나를 씁니다. 지금까지 쓴 것을 읽고 가장 가능성 높은 다음 토큰을 골라(탐욕적 디코딩) 덧붙인 뒤 다시 실행합니다. 앞 위치의 키와 밸류는 변하지 않으므로 **키/밸류 캐시**에 보관하고, 각 단계는 새 행만 계산합니다. 반면 학습할 때는 티처 포싱으로 인과 마스크 아래에서 모든 위치를 한 번에 계산합니다."},
    "lesson.10.ask": {
        "en": "Step {k}: the decoder has written “{text}”. What will it write next?",
        "ko": "단계 {k}: 디코더가 지금까지 쓴 글은 “{text}”입니다. 다음에는 무엇을 쓸까요?"},
    "lesson.10.why": {
        "en": "“{tok}”, with probability {p}. This step's self-attention query (position {q}) reads {n} keys: the {c} kept in the cache and its own. The whole output: “{out}”.",
        "ko": "“{tok}”, 확률 {p}입니다. 이 단계의 셀프 어텐션 쿼리(위치 {q})는 키 {n}개를 읽습니다: 캐시에 보관된 {c}개와 자기 자신의 키입니다. 전체 출력: “{out}”."},
    "lesson.11.title": {"en": "From 2017 to today: learned and rotary positions, grouped-query attention, sliding windows, QK-norm", "ko": "2017년부터 지금까지: 학습된 위치, 회전 위치, 그룹 쿼리 어텐션, 슬라이딩 윈도, QK 노름"},
    "lesson.11.text": {
        "en": "Later models kept attention and changed the rest. BERT-style encoders such as MiniLM **learn** a position embedding (as tutorial 003's code does) instead of computing sines. Llama-style decoders such as SmolLM2 add nothing to the embedding: they **rotate** each query and key by an angle that grows with the position (RoPE), so position enters a score only through the distance between the two tokens. And to shrink the key/value cache, several query heads share one key/value head: **grouped-query attention**. Gemma 3 goes further: all four query heads read one key/value head (multi-query), five of every six layers see only a **sliding window** of the last 512 tokens (local layers; the sixth is global), and each head's q and k are normalised before the dot product (**QK-norm**), so that scores stay in range.",
        "ko": "이후의 모델들은 어텐션은 그대로 두고 나머지를 바꾸었습니다. MiniLM 같은 BERT 계열 인코더는 사인파를 계산하지 않고 튜토리얼 003의 코드처럼 위치 임베딩을 **학습**합니다. SmolLM2 같은 Llama 계열 디코더는 임베딩에 아무것도 더하지 않고, 쿼리와 키를 위치에 비례하는 각도로 **회전**시킵니다 (RoPE). 그래서 점수에는 위치가 두 토큰 사이의 거리로만 반영됩니다. 그리고 키/밸류 캐시를 줄이려고 여러 쿼리 헤드가 키/밸류 헤드 하나를 함께 씁니다: **그룹 쿼리 어텐션**. Gemma 3는 더 나아갑니다: 쿼리 헤드 네 개가 모두 키/밸류 헤드 하나를 읽고(멀티 쿼리), 여섯 레이어 중 다섯은 마지막 512개 토큰의 **슬라이딩 윈도**만 보며(지역 레이어, 여섯째는 전역), 각 헤드의 q와 k를 내적 전에 정규화해서(**QK 노름**) 점수가 범위 안에 머물게 합니다."},
    "lesson.11.minilm": {"en": "MiniLM (a BERT encoder): learned position embeddings.", "ko": "MiniLM (BERT 인코더): 학습된 위치 임베딩."},
    "lesson.11.smollm2": {"en": "SmolLM2 (a Llama decoder): rotary positions and grouped-query attention.", "ko": "SmolLM2 (Llama 디코더): 회전 위치 인코딩과 그룹 쿼리 어텐션."},
    "lesson.11.ask": {
        "en": "SmolLM2 has {n} query heads but only {kv} key/value heads. Which key/value head does query head {h} read?",
        "ko": "SmolLM2에는 쿼리 헤드가 {n}개 있지만 키/밸류 헤드는 {kv}개뿐입니다. 쿼리 헤드 {h}번은 어느 키/밸류 헤드를 읽을까요?"},
    "lesson.11.why": {
        "en": "K/V head {g}: {n} query heads / {kv} K/V heads = {group} query heads per K/V head, so heads {heads} share it (their keys are identical in the run).",
        "ko": "K/V 헤드 {g}입니다. 쿼리 헤드 {n}개 / K/V 헤드 {kv}개 = K/V 헤드마다 쿼리 헤드 {group}개이므로, 헤드 {heads} 모두 이 K/V 헤드를 함께 씁니다 (실행에서 이들의 키는 똑같습니다)."},
    # --- beyond one head: logit lens, rollout, value norms, query/key map, head roles (issue 26) ------
    "section_beyond": {
        "en": "Beyond one head",
        "ko": "헤드 하나를 넘어서"},
    "stage.logit_lens.title": {
        "en": "Logit lens: what each layer predicts",
        "ko": "로짓 렌즈: 레이어마다의 예측"},
    "stage.logit_lens.explain.decoder": {
        "en": "What would the model predict if it stopped after layer ℓ? Each cell reads the residual stream "
              "after that layer through the model's own readout ({readout}), "
              "exactly as the model reads its last layer, and shows the most likely next token and its "
              "probability. The top row (layer {last_layer}) is the model's real prediction; position i predicts "
              "the token at i + 1. At the last position ({last}) the top token is “{word}” from layer {settled} "
              "on. The earlier layers were never trained to be read this way, so their rows are a rough view "
              "of what the stream already holds, not what those layers “mean”.",
        "ko": "모델이 레이어 ℓ 다음에서 멈춘다면 무엇을 예측할까요? 각 칸은 그 레이어 뒤의 잔차 스트림을 모델 자신의 "
              "출력 단계({readout})로 읽은 결과로, 모델이 마지막 레이어를 읽는 방식과 똑같습니다. "
              "가장 가능성 높은 다음 토큰과 그 확률을 보여 줍니다. 맨 위 행(레이어 {last_layer})이 모델의 실제 예측이며, "
              "위치 i는 i + 1의 토큰을 예측합니다. 마지막 위치({last})에서는 레이어 {settled}부터 1위 토큰이 "
              "“{word}”입니다. 앞쪽 레이어는 이렇게 읽히도록 학습된 적이 없으므로, 그 행들은 스트림에 이미 담긴 것을 "
              "대략 보여 줄 뿐 그 레이어가 “뜻하는” 바는 아닙니다."},
    "stage.logit_lens.explain.seed": {
        "en": "What would the decoder write if it stopped after layer ℓ? Each cell reads the decoder's "
              "residual stream after that layer through the model's own readout ({readout}), and shows the most "
              "likely next token and its probability. The top row (layer {last_layer} of {n}) is what the model "
              "wrote; position t predicts the token at t + 1. At the last position ({last}) the top token is "
              "“{word}” from layer {settled} on. The earlier layers were never trained to be read this way: a "
              "rough view, not what they “mean”.",
        "ko": "디코더가 레이어 ℓ 다음에서 멈춘다면 무엇을 쓸까요? 각 칸은 그 레이어 뒤의 디코더 잔차 스트림을 모델 "
              "자신의 출력 단계({readout})로 "
              "읽어, 가장 가능성 높은 다음 토큰과 그 확률을 보여 줍니다. 맨 위 행({n}개 중 레이어 {last_layer})이 "
              "모델이 실제로 쓴 것이며, 위치 t는 t + 1의 토큰을 예측합니다. 마지막 위치({last})에서는 레이어 "
              "{settled}부터 1위 토큰이 “{word}”입니다. 앞쪽 레이어는 이렇게 읽히도록 학습된 적이 없으므로 대략적인 "
              "모습일 뿐, 그 레이어가 “뜻하는” 바는 아닙니다."},
    "lens.read.norm": {"en": "the final {norm}", "ko": "마지막 {norm}"},
    "lens.read.scale": {"en": "× {scale}{why}", "ko": "× {scale}{why}"},
    "lens.read.tied": {"en": "the output matrix E (the embedding matrix, tied)", "ko": "출력 행렬 E (묶인 임베딩 행렬)"},
    "lens.read.out": {"en": "the output matrix", "ko": "출력 행렬"},
    "lens.read.bias": {"en": "+ the output bias", "ko": "+ 출력 편향"},
    "lens.read.softcap": {"en": "the final soft-cap {c}·tanh(z / {c})", "ko": "마지막 소프트캡 {c}·tanh(z / {c})"},
    "lens.read.then": {"en": ", then ", "ko": ", 그다음 "},
    "lens.read.post": {"en": "; each post-{norm} block already ends in a norm, so no norm comes between",
                       "ko": "; 사후 {norm} 블록마다 이미 정규화로 끝나므로 그 사이에 정규화는 없습니다"},
    "stage.logit_lens.explain.pending": {
        "en": "What would the model predict if it stopped after layer ℓ? The logit lens reads the residual stream "
              "after each of the {n} layers through the model's own readout ({readout}), exactly as the model reads its last layer, and shows the most likely next "
              "token and its probability at every position. It is computed when this stage is opened: every "
              "layer through the whole vocabulary, about as costly as a forward pass. The earlier layers were "
              "never trained to be read this way, so their rows are a rough view, not what those layers “mean”.",
        "ko": "모델이 레이어 ℓ 다음에서 멈춘다면 무엇을 예측할까요? 로짓 렌즈는 {n}개 레이어 각각의 뒤에서 잔차 스트림을 "
              "모델 자신의 출력 단계({readout})로 읽어, 모델이 마지막 레이어를 읽는 "
              "방식과 똑같이 위치마다 가장 가능성 높은 다음 토큰과 그 확률을 보여 줍니다. 이 단계를 열 때 계산하며, "
              "모든 레이어를 어휘 전체에 대해 읽으므로 순전파 한 번만큼 비용이 듭니다. 앞쪽 레이어는 이렇게 읽히도록 "
              "학습된 적이 없으므로, 그 행들은 대략적인 모습일 뿐 그 레이어가 “뜻하는” 바는 아닙니다."},
    "lens.not_made": {
        "en": "The logit lens of this sentence is not computed yet: it reads every layer through the output "
              "matrix, about as costly as a forward pass. Open this stage on the page once (the app then keeps "
              "it), or export it with python -m explorer.export --stages logit_lens.",
        "ko": "이 문장의 로짓 렌즈는 아직 계산되지 않았습니다. 모든 레이어를 출력 행렬로 읽으므로 순전파 한 번만큼 "
              "비용이 듭니다. 페이지에서 이 단계를 한 번 열거나(그러면 앱이 보관합니다), "
              "python -m explorer.export --stages logit_lens 로 내보내세요."},
    "needs.readout": {
        "en": "an output head (a decoder)",
        "ko": "출력 헤드(디코더)가 있는"},
    "needs.self_attn": {
        "en": "self-attention (choose a self-attention block)",
        "ko": "셀프 어텐션이 있는 (셀프 어텐션 블록을 고르세요)"},
    "stage.rollout.title": {
        "en": "Attention rollout across layers",
        "ko": "레이어를 가로지르는 어텐션 롤아웃"},
    "stage.rollout.explain.causal": {
        "en": "Attention rollout (Abnar & Zuidema 2020) multiplies the layers' attention to estimate how much "
              "of each input token reaches each position at the top of the stack. It assumes three things: the "
              "residual connection passes the stream on unchanged (the 0.5·I: half of every position stays "
              "itself), the {h} heads count equally (their weights are averaged), and mixing is linear (the "
              "values, W_O, the feed-forward and the norms are left out). None of them holds exactly, so rollout "
              "misleads where they matter: a head can put much weight on a token and move almost nothing (see "
              "the value norms), and in a causal model the first tokens collect weight merely because every "
              "later position can see them. Here, over {n} layers, the last token (position {last}) keeps {own}% "
              "of itself and gets {first}% from the first token.",
        "ko": "어텐션 롤아웃(아브나르와 자위더마 2020)은 레이어들의 어텐션을 곱해, 입력 토큰 각각이 스택 맨 위의 각 위치에 "
              "얼마나 이르는지 어림합니다. 세 가지를 가정합니다: 잔차 연결은 스트림을 그대로 넘긴다(0.5·I: 각 위치의 "
              "절반은 자기 자신으로 남음), {h}개 헤드는 똑같이 센다(가중치를 평균), 섞임은 선형이다(밸류, W_O, "
              "피드포워드, 정규화는 빠짐). 어느 것도 정확히 맞지 않으므로, 그것이 중요한 곳에서 롤아웃은 오해를 "
              "부릅니다: 헤드는 어떤 토큰에 가중치를 많이 주면서도 거의 아무것도 옮기지 않을 수 있고(밸류 노름 참고), "
              "인과 모델에서는 뒤의 모든 위치가 볼 수 있다는 이유만으로 앞쪽 토큰에 가중치가 쌓입니다. 여기서는 "
              "{n}개 레이어를 거쳐 마지막 토큰(위치 {last})이 자기 자신을 {own}% 유지하고 첫 토큰에서 {first}%를 받습니다."},
    "stage.rollout.explain.encoder": {
        "en": "Attention rollout (Abnar & Zuidema 2020) multiplies the layers' attention to estimate how much "
              "of each input token reaches each position at the top of the stack. It assumes three things: the "
              "residual connection passes the stream on unchanged (the 0.5·I: half of every position stays "
              "itself), the {h} heads count equally (their weights are averaged), and mixing is linear (the "
              "values, W_O, the feed-forward and the norms are left out). None of them holds exactly, so rollout "
              "misleads where they matter: a head can put much weight on a token and move almost nothing (see "
              "the value norms), so tokens that many heads use as a resting place (start, end or separator "
              "tokens) look more important than they are. Here, over {n} layers, the last token (position "
              "{last}) keeps {own}% of itself and gets {first}% from the first token.",
        "ko": "어텐션 롤아웃(아브나르와 자위더마 2020)은 레이어들의 어텐션을 곱해, 입력 토큰 각각이 스택 맨 위의 각 위치에 "
              "얼마나 이르는지 어림합니다. 세 가지를 가정합니다: 잔차 연결은 스트림을 그대로 넘긴다(0.5·I: 각 위치의 "
              "절반은 자기 자신으로 남음), {h}개 헤드는 똑같이 센다(가중치를 평균), 섞임은 선형이다(밸류, W_O, "
              "피드포워드, 정규화는 빠짐). 어느 것도 정확히 맞지 않으므로, 그것이 중요한 곳에서 롤아웃은 오해를 "
              "부릅니다: 헤드는 어떤 토큰에 가중치를 많이 주면서도 거의 아무것도 옮기지 않을 수 있어(밸류 노름 참고), "
              "많은 헤드가 쉬는 자리로 쓰는 토큰(시작, 끝, 구분 토큰)이 실제보다 중요해 보입니다. 여기서는 {n}개 "
              "레이어를 거쳐 마지막 토큰(위치 {last})이 자기 자신을 {own}% 유지하고 첫 토큰에서 {first}%를 받습니다."},
    "stage.rollout.explain.seed_decoder": {
        "en": "Attention rollout (Abnar & Zuidema 2020) over the decoder's self-attention: it multiplies "
              "the layers' attention to estimate how much of each decoder input token reaches each position at "
              "the top. It assumes that the residual connection passes the stream on unchanged (the 0.5·I), "
              "that the {h} heads count equally (averaged) and that mixing is linear (values, W_O, feed-forward "
              "and norms left out); and here it follows only the decoder's self-attention: what cross-attention "
              "brings in from the encoder is not counted at all. Read it as a rough picture: in a causal stack "
              "the first tokens collect weight merely because every later position can see them. Here, over "
              "{n} layers, the last token (position {last}) keeps {own}% of itself and gets {first}% from the "
              "first token ({start}).",
        "ko": "디코더의 셀프 어텐션에 대한 어텐션 롤아웃(아브나르와 자위더마 2020)입니다. 레이어들의 어텐션을 곱해 "
              "디코더 입력 토큰 각각이 맨 위의 각 위치에 얼마나 이르는지 어림합니다. 잔차 연결은 스트림을 그대로 "
              "넘기고(0.5·I), {h}개 헤드는 똑같이 세며(평균), 섞임은 선형이라고(밸류, W_O, 피드포워드, 정규화는 "
              "빠짐) 가정합니다. 게다가 여기서는 디코더의 셀프 어텐션만 따라가므로, 크로스 어텐션이 인코더에서 "
              "가져오는 것은 전혀 세지 않습니다. 대략적인 그림으로 읽으세요: 인과 스택에서는 뒤의 모든 위치가 볼 수 "
              "있다는 이유만으로 앞쪽 토큰에 가중치가 쌓입니다. 여기서는 {n}개 레이어를 거쳐 마지막 토큰(위치 "
              "{last})이 자기 자신을 {own}% 유지하고 첫 토큰({start})에서 {first}%를 받습니다."},
    "stage.value_norms.title": {
        "en": "Weight is not influence: value-weighted attention",
        "ko": "가중치는 영향력이 아니다: 밸류로 잰 어텐션"},
    "stage.value_norms.explain.bias": {
        "en": "What this head adds to position i is Σ_j α_ij · v_j W_O[h]: each key's term is its weight times "
              "its value vector after the output projection. The middle panel shows the length of each term, "
              "‖α_ij v_j W_O[h]‖ (Kobayashi et al. 2020), beside the weight α_ij on the left; the bars on the right, "
              "‖v_j W_O[h]‖, how much each key would move with all the weight. In this head the "
              "queries after the first put {w0}% of their weight on the first token, whose value vector after "
              "W_O is {ratio}× as long as the other tokens' on average; its terms make up {n0}% of the summed "
              "lengths of all the head's terms at those queries (a share of lengths, not of the output's length). Much weight with a short value vector is an attention sink: "
              "a place to put weight the head does not need. The values are those this head reads (K/V head "
              "{kv}); the output bias b_O belongs to all heads together and is left out.",
        "ko": "이 헤드가 위치 i에 더하는 것은 Σ_j α_ij · v_j W_O[h]입니다: 각 키의 항은 가중치 곱하기 출력 투영을 거친 "
              "밸류 벡터입니다. 가운데 패널은 각 항의 길이 ‖α_ij v_j W_O[h]‖(고바야시 외 2020)를 왼쪽의 가중치 "
              "α_ij 옆에 보여 주고, 오른쪽 막대는 각 키가 가중치를 모두 받으면 옮길 길이 ‖v_j W_O[h]‖입니다. 이 헤드에서 첫 번째 뒤의 쿼리들은 가중치의 {w0}%를 첫 토큰에 줍니다. 출력 투영을 "
              "거친 첫 토큰의 밸류 벡터는 다른 토큰들 평균의 {ratio}배 길이이며, 그 쿼리들에서 헤드의 모든 항의 길이를 더한 것 가운데 그 토큰의 항이 차지하는 몫은 {n0}%입니다 (출력 길이의 몫이 아니라 길이들의 합의 몫). 가중치는 많은데 밸류 벡터가 짧으면 어텐션 싱크입니다: "
              "헤드가 필요 없는 가중치를 놓아두는 자리입니다. 밸류는 이 헤드가 읽는 것(K/V 헤드 {kv})이며, 출력 "
              "바이어스 b_O는 모든 헤드에 함께 속하므로 뺐습니다."},
    "stage.value_norms.explain.no_bias": {
        "en": "What this head adds to position i is Σ_j α_ij · v_j W_O[h]: each key's term is its weight times "
              "its value vector after the output projection. The middle panel shows the length of each term, "
              "‖α_ij v_j W_O[h]‖ (Kobayashi et al. 2020), beside the weight α_ij on the left; the bars on the right, "
              "‖v_j W_O[h]‖, how much each key would move with all the weight. In this head the "
              "queries after the first put {w0}% of their weight on the first token, whose value vector after "
              "W_O is {ratio}× as long as the other tokens' on average; its terms make up {n0}% of the summed "
              "lengths of all the head's terms at those queries (a share of lengths, not of the output's length). Much weight with a short value vector is an attention sink: "
              "a place to put weight the head does not need. The values are those this head reads (K/V head "
              "{kv}).",
        "ko": "이 헤드가 위치 i에 더하는 것은 Σ_j α_ij · v_j W_O[h]입니다: 각 키의 항은 가중치 곱하기 출력 투영을 거친 "
              "밸류 벡터입니다. 가운데 패널은 각 항의 길이 ‖α_ij v_j W_O[h]‖(고바야시 외 2020)를 왼쪽의 가중치 "
              "α_ij 옆에 보여 주고, 오른쪽 막대는 각 키가 가중치를 모두 받으면 옮길 길이 ‖v_j W_O[h]‖입니다. 이 헤드에서 첫 번째 뒤의 쿼리들은 가중치의 {w0}%를 첫 토큰에 줍니다. 출력 투영을 "
              "거친 첫 토큰의 밸류 벡터는 다른 토큰들 평균의 {ratio}배 길이이며, 그 쿼리들에서 헤드의 모든 항의 길이를 더한 것 가운데 그 토큰의 항이 차지하는 몫은 {n0}%입니다 (출력 길이의 몫이 아니라 길이들의 합의 몫). 가중치는 많은데 밸류 벡터가 짧으면 어텐션 싱크입니다: "
              "헤드가 필요 없는 가중치를 놓아두는 자리입니다. 밸류는 이 헤드가 읽는 것(K/V 헤드 {kv})입니다."},
    "stage.qk_map.title": {
        "en": "Queries and keys in one map",
        "ko": "쿼리와 키를 한 지도에"},
    "stage.qk_map.explain.plain": {
        "en": "Every query (circles) and key (diamonds) of head {h} in layer {layer}, for all {n} sentences of "
              "the batch, in one plane: the first two principal components (PCA) of the vectors together, "
              "coloured by position. The keys are first translated so that their mean equals the queries' "
              "mean, as AttentionViz does: that adds the same number q·(q̄ − k̄) to every score of a query, "
              "which softmax ignores, so the weights stay the same while queries and keys share a centre. Near "
              "is only roughly “attends to”: two dimensions keep part of the variance (the axis titles say how "
              "much) and a score is a dot product, not a distance. Lines join the {lines} strongest "
              "query→key pairs (each query's strongest key).",
        "ko": "레이어 {layer} 헤드 {h}의 모든 쿼리(원)와 키(마름모)를, 배치의 문장 {n}개 모두에 대해 한 평면에 "
              "놓았습니다: 벡터 전체의 첫 두 주성분(PCA)이며 색은 위치입니다. 먼저 키의 평균이 쿼리의 평균과 같도록 "
              "키를 평행이동합니다(어텐션비즈와 같은 방법). 그러면 한 쿼리의 모든 점수에 같은 수 q·(q̄ − k̄)가 "
              "더해지는데 소프트맥스는 이를 무시하므로, 가중치는 그대로이고 쿼리와 키가 같은 중심을 갖습니다. "
              "가까움은 “주목함”과 대략만 같습니다: 두 차원은 분산의 일부만 담고(축 제목에 비율) 점수는 거리가 아닌 "
              "내적입니다. 선은 가장 강한 쿼리→키 쌍 {lines}개(쿼리마다 가장 강한 키)를 잇습니다."},
    "stage.qk_map.explain.rotary": {
        "en": "Every query (circles) and key (diamonds) of head {h} in layer {layer}, for all {n} sentences of "
              "the batch, in one plane: the first two principal components (PCA) of the vectors together, "
              "coloured by position. They are taken after the rotary encoding, so position is part of where "
              "they lie. The keys are first translated so that their mean equals the queries' mean, as "
              "AttentionViz does: that adds the same number q·(q̄ − k̄) to every score of a query, which softmax "
              "ignores, so the weights stay the same while queries and keys share a centre. Near is only "
              "roughly “attends to”: two dimensions keep part of the variance (the axis titles say how much) and "
              "a score is a dot product, not a distance. Lines join the {lines} strongest query→key pairs "
              "(each query's strongest key).",
        "ko": "레이어 {layer} 헤드 {h}의 모든 쿼리(원)와 키(마름모)를, 배치의 문장 {n}개 모두에 대해 한 평면에 "
              "놓았습니다: 벡터 전체의 첫 두 주성분(PCA)이며 색은 위치입니다. 회전 위치 인코딩을 적용한 뒤의 벡터이므로 "
              "위치도 점이 놓이는 자리에 들어 있습니다. 먼저 키의 평균이 쿼리의 평균과 같도록 키를 평행이동합니다"
              "(어텐션비즈와 같은 방법). 그러면 한 쿼리의 모든 점수에 같은 수 q·(q̄ − k̄)가 더해지는데 소프트맥스는 "
              "이를 무시하므로, 가중치는 그대로이고 쿼리와 키가 같은 중심을 갖습니다. 가까움은 “주목함”과 대략만 "
              "같습니다: 두 차원은 분산의 일부만 담고(축 제목에 비율) 점수는 거리가 아닌 내적입니다. 선은 가장 강한 "
              "쿼리→키 쌍 {lines}개(쿼리마다 가장 강한 키)를 잇습니다."},
    "stage.head_roles.title": {
        "en": "Head roles: previous token, first token, self, induction",
        "ko": "헤드의 역할: 이전 토큰, 첫 토큰, 자기 자신, 유도"},
    "stage.head_roles.explain.measured": {
        "en": "A score per head for four jobs, so that a label comes from a number, not from one picture. "
              "Previous token: the mean weight from each token to the one before it; first token: to the first "
              "token (an attention sink); self: to itself; these three over this sentence's {n} real tokens, "
              "leaving out position 0 (in a causal model it can only read itself). Induction: on {tokens} "
              "random tokens (a sequence written twice), the mean weight from each token of the second copy to "
              "the token that followed it in the first copy; such heads let a model continue a pattern it has "
              "seen (Olsson et al. 2022). Strongest here: previous token {previous_token}; first token "
              "{first_token}; self {self}; induction {induction}. A score is an average: one head can do "
              "several jobs, and a short sentence gives noisy scores.",
        "ko": "헤드마다 네 가지 일의 점수를 매겨, 이름표가 그림 한 장이 아니라 숫자에서 나오게 합니다. 이전 토큰: 각 "
              "토큰이 바로 앞 토큰에 주는 가중치의 평균, 첫 토큰: 첫 토큰에 주는 평균(어텐션 싱크), 자기 자신: 자신에게 "
              "주는 평균. 이 셋은 이 문장의 실제 토큰 {n}개에서 재며, 위치 0은 뺍니다(인과 모델에서는 자기 자신만 "
              "읽을 수 있음). 유도: 무작위 토큰 {tokens}개(같은 열을 두 번 씀)에서, 두 번째 복사본의 각 토큰이 첫 "
              "번째 복사본에서 그 토큰 바로 뒤에 왔던 토큰에 주는 가중치의 평균입니다. 이런 헤드 덕분에 모델은 본 적 "
              "있는 패턴을 이어 갑니다(올슨 외 2022). 여기서 가장 강한 헤드: 이전 토큰 {previous_token}; 첫 토큰 "
              "{first_token}; 자기 자신 {self}; 유도 {induction}. 점수는 평균입니다: 한 헤드가 여러 일을 할 수 있고, "
              "짧은 문장의 점수는 흔들립니다."},
    "stage.head_roles.explain.no_induction": {
        "en": "A score per head for jobs, so that a label comes from a number, not from one picture. Previous "
              "token: the mean weight from each token to the one before it; first token: to the first token (an "
              "attention sink); self: to itself; over this sentence's {n} real tokens, leaving out position 0 "
              "(in a causal model it can only read itself). Strongest here: previous token {previous_token}; "
              "first token {first_token}; self {self}. Induction ({induction}) is not measured for this run: it "
              "needs a forward pass of its own on {tokens} random tokens (a sequence written twice), which the "
              "app makes once per model when this stage is opened.",
        "ko": "헤드마다 일의 점수를 매겨, 이름표가 그림 한 장이 아니라 숫자에서 나오게 합니다. 이전 토큰: 각 토큰이 바로 "
              "앞 토큰에 주는 가중치의 평균, 첫 토큰: 첫 토큰에 주는 평균(어텐션 싱크), 자기 자신: 자신에게 주는 평균. "
              "이 문장의 실제 토큰 {n}개에서 재며 위치 0은 뺍니다(인과 모델에서는 자기 자신만 읽을 수 있음). 여기서 "
              "가장 강한 헤드: 이전 토큰 {previous_token}; 첫 토큰 {first_token}; 자기 자신 {self}. 유도({induction})는 "
              "이 실행에서 재지 않았습니다: 무작위 토큰 {tokens}개(같은 열을 두 번 씀)로 따로 순전파를 한 번 해야 "
              "하며, 앱은 이 단계를 열 때 모델마다 한 번 그렇게 합니다."},
    "stage.head_roles.explain.seed_decoder": {
        "en": "A score per head for jobs, so that a label comes from a number, not from one picture. Previous "
              "token: the mean weight from each token to the one before it; first token: to the first token "
              "({start}, an attention sink); self: to itself; over the decoder's {n} input tokens ({start} and what the "
              "model wrote), leaving out position 0 (it can only read itself). Strongest here: previous token "
              "{previous_token}; first token {first_token}; self {self}. Induction ({induction}) is not measured "
              "for the decoder: it reads its own output, not a text that can be written twice ({tokens} "
              "random tokens); choose the encoder for it.",
        "ko": "헤드마다 일의 점수를 매겨, 이름표가 그림 한 장이 아니라 숫자에서 나오게 합니다. 이전 토큰: 각 토큰이 바로 "
              "앞 토큰에 주는 가중치의 평균, 첫 토큰: 첫 토큰({start}, 어텐션 싱크)에 주는 평균, 자기 자신: 자신에게 주는 "
              "평균. 디코더 입력 토큰 {n}개({start}와 모델이 쓴 것)에서 재며 위치 0은 뺍니다(자기 자신만 읽을 수 있음). "
              "여기서 가장 강한 헤드: 이전 토큰 {previous_token}; 첫 토큰 {first_token}; 자기 자신 {self}. 유도"
              "({induction})는 디코더에서는 재지 않습니다: 디코더는 두 번 쓸 수 있는 글(무작위 토큰 {tokens}개)이 "
              "아니라 자기 출력을 읽기 때문입니다. 유도를 보려면 인코더를 고르세요."},
    "roles.strongest": {
        "en": "Strongest by {role}: {heads}",
        "ko": "{role} 점수가 가장 높은 헤드: {heads}"},
    "roles.no_induction": {
        "en": "Induction is not measured for this run.",
        "ko": "이 실행에서는 유도 점수를 재지 않았습니다."},
    "roles.choose": {
        "en": "Colour the heads by",
        "ko": "헤드를 색칠할 기준"},
    "fig.col_token_id": {"en": "token_id", "ko": "토큰_id"},
    "fig.col_p": {"en": "p", "ko": "p"},
    "fig.col_norm": {"en": "norm", "ko": "노름"},
    "fig.col_kind": {"en": "kind", "ko": "종류"},
    "fig.col_x": {"en": "x", "ko": "x"},
    "fig.col_y": {"en": "y", "ko": "y"},
    "fig.col_previous_token": {"en": "previous_token", "ko": "이전_토큰"},
    "fig.col_first_token": {"en": "first_token", "ko": "첫_토큰"},
    "fig.col_self": {"en": "self", "ko": "자기_자신"},
    "fig.col_induction": {"en": "induction", "ko": "유도"},
    "fig.role_previous_token": {"en": "previous token", "ko": "이전 토큰"},
    "fig.role_first_token": {"en": "first token", "ko": "첫 토큰"},
    "fig.role_self": {"en": "itself", "ko": "자기 자신"},
    "fig.role_induction": {"en": "induction", "ko": "유도"},
    "fig.qk_lines": {"en": "strongest query→key pairs", "ko": "가장 강한 쿼리→키 쌍"},
    "tx.second_copy": {"en": "2nd copy", "ko": "두 번째 복사본"},
    "tx.first_copy": {"en": "1st copy", "ko": "첫 번째 복사본"},
    "lesson.lens.title": {
        "en": "What each layer predicts: the logit lens",
        "ko": "레이어마다 무엇을 예측하나: 로짓 렌즈"},
    "lesson.lens.text": {
        "en": "A decoder writes its prediction only after its last layer, but every layer adds to the same residual stream. The **logit lens** reads that stream after each layer through the model's own final norm and output matrix, as if the model stopped there. Does the answer appear early and get refined, or only near the top?",
        "ko": "디코더는 마지막 레이어 뒤에서야 예측을 내놓지만, 모든 레이어는 같은 잔차 스트림에 더해 갑니다. **로짓 렌즈**는 각 레이어 뒤의 스트림을 모델 자신의 마지막 정규화와 출력 행렬로 읽어, 모델이 거기서 멈춘 것처럼 봅니다. 답은 일찍 나타나 다듬어질까요, 아니면 맨 위 가까이에서야 나타날까요?"},
    "lesson.lens.ask": {
        "en": "SmolLM2 predicts “{tok}” after “{text}”. Read through the lens, from which of its {n} layers on is “{tok}” already the top token at the last position, and stays so up to the top?",
        "ko": "SmolLM2는 “{text}” 다음에 “{tok}”을(를) 예측합니다. 렌즈로 읽으면, {n}개 레이어 가운데 어느 구간부터 마지막 위치의 1위 토큰이 이미 “{tok}”이고 맨 위까지 그대로일까요?"},
    "lesson.lens.band": {
        "en": "layers {a}–{b}",
        "ko": "레이어 {a}–{b}"},
    "lesson.lens.why": {
        "en": "From layer {k} of {n} on (p = {p} there, {top} at the top). Layer {before} still put “{below}” first, and at layer {mid}, halfway up, the lens showed “{mid_tok}” (p = {mid_p}). The grid shows every layer and position.",
        "ko": "{n}개 중 레이어 {k}부터입니다 (그곳에서 p = {p}, 맨 위에서 {top}). 레이어 {before}은(는) 아직 “{below}”을(를) 1위로 두었고, 절반 높이인 레이어 {mid}에서 렌즈는 “{mid_tok}”(p = {mid_p})을(를) 보였습니다. 격자에 모든 레이어와 위치가 있습니다."},
    "lesson.roles.title": {
        "en": "Heads with jobs: previous-token and induction heads",
        "ko": "일을 맡은 헤드: 이전 토큰 헤드와 유도 헤드"},
    "lesson.roles.text": {
        "en": "Some heads do one recognisable job. A **previous-token head** looks one token back. An **induction head** finds an earlier occurrence of the current token and looks at the token that came after it, which lets a model continue a pattern it has already seen (“Harry Potter … Harry → Potter”). The overview shows the heads of the layers around layer 18 on this sentence: which picture could do that?",
        "ko": "어떤 헤드는 알아볼 수 있는 한 가지 일을 합니다. **이전 토큰 헤드**는 한 토큰 앞을 봅니다. **유도 헤드**는 지금 토큰이 앞에서 나왔던 자리를 찾아 그 바로 뒤의 토큰을 봅니다. 그래서 모델은 이미 본 패턴을 이어 갈 수 있습니다 (“해리 포터 … 해리 → 포터”). 개요 그림은 이 문장에서 레이어 18 주변 레이어들의 헤드를 보여 줍니다. 어느 그림이 그 일을 할 수 있을까요?"},
    "lesson.roles.ask": {
        "en": "Measured on {tokens} random tokens (a sequence written twice), which of these four SmolLM2 heads is the strongest induction head?",
        "ko": "무작위 토큰 {tokens}개(같은 열을 두 번 씀)로 재면, 이 SmolLM2 헤드 네 개 가운데 가장 강한 유도 헤드는 어느 것일까요?"},
    "lesson.roles.why": {
        "en": "{ind}: its induction score, the mean weight from each token of the second copy to the token after that token's first occurrence, is the highest of all heads. Each of the others is the strongest head (not already chosen) at another job on this sentence's {n} tokens: previous token {prev}, first token {first}, self {self}.",
        "ko": "{ind}입니다. 유도 점수(두 번째 복사본의 각 토큰이, 그 토큰이 처음 나왔던 자리 바로 뒤 토큰에 주는 가중치의 평균)가 모든 헤드 가운데 가장 높습니다. 나머지는 각각 이 문장의 토큰 {n}개에서 다른 일을 가장 잘하는 헤드(이미 고른 것 제외)입니다: 이전 토큰 {prev}, 첫 토큰 {first}, 자기 자신 {self}."},
    "lesson.sinks.title": {
        "en": "Attention sinks: weight is not influence",
        "ko": "어텐션 싱크: 가중치는 영향력이 아니다"},
    "lesson.sinks.text": {
        "en": "Many heads put almost all their weight on the first token, whatever that token is. Weight alone does not say what a head moves: each key adds α·v·W_O, so a key whose value vector is short moves little however much weight it gets. A head with nothing to do can park its weight on such a token: an **attention sink**.",
        "ko": "많은 헤드가 첫 토큰이 무엇이든 거의 모든 가중치를 그 토큰에 줍니다. 가중치만으로는 헤드가 무엇을 옮기는지 알 수 없습니다: 각 키는 α·v·W_O를 더하므로, 밸류 벡터가 짧은 키는 가중치를 아무리 받아도 조금밖에 옮기지 못합니다. 할 일이 없는 헤드는 그런 토큰에 가중치를 놓아둘 수 있습니다: **어텐션 싱크**입니다."},
    "lesson.sinks.ask": {
        "en": "Layer {l}, head {h} puts {w}% of its weight on the first token. How long is the first token's value vector after the output projection, ‖v₀ W_O‖, compared with the other tokens' (their mean)?",
        "ko": "레이어 {l}, 헤드 {h}은(는) 가중치의 {w}%를 첫 토큰에 줍니다. 출력 투영을 거친 첫 토큰의 밸류 벡터 ‖v₀ W_O‖는 다른 토큰들의 것(평균)에 비해 얼마나 길까요?"},
    "lesson.sinks.bin0": {"en": "less than a quarter as long", "ko": "4분의 1보다 짧다"},
    "lesson.sinks.bin1": {"en": "a quarter to three quarters as long", "ko": "4분의 1에서 4분의 3 사이"},
    "lesson.sinks.bin2": {"en": "about as long (0.75× to 1.5×)", "ko": "비슷하다 (0.75배에서 1.5배)"},
    "lesson.sinks.bin3": {"en": "more than 1.5× as long", "ko": "1.5배보다 길다"},
    "lesson.sinks.why": {
        "en": "{r}× as long ({first} against {others} on average). So layer {l}, head {h} gives the first token {w}% of its weight but moves little with it: the first token's terms make up {share}% of the summed lengths of the head's terms, each of them short. The value norms show it cell by cell (middle panel) and key by key (the bars: ‖v_j W_O‖): weight is where a head looks, the norm is what it moves.",
        "ko": "{r}배입니다 (평균 {others}에 비해 {first}). 그러니 레이어 {l}, 헤드 {h}은(는) 첫 토큰에 가중치의 {w}%를 주지만 그것으로 옮기는 것은 적습니다: 헤드의 항들의 길이를 더한 것 가운데 첫 토큰의 항이 {share}%를 차지하지만 각 항이 짧습니다. 밸류 노름이 칸마다(가운데 패널), 키마다(막대: ‖v_j W_O‖) 보여 줍니다: 가중치는 헤드가 보는 곳이고, 노름은 헤드가 옮기는 것입니다."},
    "lens.running": {
        "en": "Reading every layer through the output matrix…",
        "ko": "모든 레이어를 출력 행렬로 읽는 중…"},
    "roles.running": {
        "en": "Measuring induction on a repeated random sequence (once per model)…",
        "ko": "반복된 무작위 토큰 열로 유도 점수를 재는 중 (모델마다 한 번)…"},
    # --- beyond one head: patching and sampling (issue 26) ---------------------------------------
    "lesson.12.title": {
        "en": "Where is the answer made? Activation patching",
        "ko": "답은 어디에서 만들어질까? 활성 패칭"},
    "lesson.12.text": {
        "en": "SmolLM2 completes “The capital of France is” with “ Paris”. Where inside the network is that answer made? Run a second sentence that differs in one word (“Italy”), so its answer is something else, and copy **one piece** of the first run into the second: the residual stream after one layer, at one position. If the answer comes back, that piece carries it. Doing this for every layer and position (one forward pass each, in batches) maps where the answer lives. The first line is the clean sentence, the second the corrupted one; both need the same number of tokens.",
        "ko": "SmolLM2는 “The capital of France is” 뒤에 “ Paris”를 씁니다. 이 답은 네트워크 안 어디에서 만들어질까요? 한 단어(“Italy”)만 다른 두 번째 문장을 실행하면 답이 달라집니다. 이제 첫 번째 실행의 **한 조각**을 두 번째 실행에 복사해 넣습니다: 한 레이어를 지난 잔차 스트림의 한 위치. 답이 돌아온다면 그 조각이 답을 담고 있는 것입니다. 모든 레이어와 위치에 대해 이렇게 하면(칸마다 순전파 한 번, 묶음으로 실행) 답이 어디에 있는지 지도가 그려집니다. 첫 줄이 깨끗한 문장, 둘째 줄이 오염된 문장이며, 두 문장의 토큰 수가 같아야 합니다."},
    "lesson.12.ask": {
        "en": "The two sentences first differ at “{word}” (position {i}). Patching it after layer 0 gives log p(“{answer}”) = {w0} (the corrupted run alone: {corrupted}). From which layer on does patching the last position, “{end}” (position {j}), bring “{answer}” back more than patching “{word}”?",
        "ko": "두 문장은 “{word}”(위치 {i})에서 처음 달라집니다. 0번 레이어 뒤에서 이 위치를 패칭하면 로그 확률(“{answer}”) = {w0}입니다 (오염된 실행만으로는 {corrupted}). 몇 번 레이어부터는 마지막 위치 “{end}”(위치 {j})를 패칭하는 편이 “{word}”를 패칭하는 것보다 “{answer}”를 더 잘 되살릴까요?"},
    "lesson.12.band": {
        "en": "layers {a}–{b}",
        "ko": "레이어 {a}–{b}"},
    "lesson.12.never": {
        "en": "never: the changed word's position wins at every layer",
        "ko": "어느 레이어에서도 아님: 바뀐 단어의 위치가 늘 이김"},
    "lesson.12.why": {
        "en": "From layer {layer}. At layer {before}, patching “{word}” still gives log p {w} against {e} for “{end}”; from layer {layer} on the last position wins: by then the layers have moved what “{word}” says into the last position, which is what the answer is read from (clean log p {clean}, corrupted {corrupted}; {n} patched forward passes).",
        "ko": "{layer}번 레이어부터입니다. {before}번 레이어에서는 “{word}”를 패칭하면 로그 확률이 {w}, “{end}”는 {e}입니다. {layer}번 레이어부터는 마지막 위치가 이깁니다: 그때쯤 레이어들이 “{word}”의 정보를 답을 읽어 내는 마지막 위치로 옮겨 놓았기 때문입니다 (깨끗한 실행의 로그 확률 {clean}, 오염된 실행 {corrupted}; 패칭한 순전파 {n}번)."},
    "lesson.12.ask_one": {
        "en": "Patching needs two lines with the same number of tokens (a clean and a corrupted sentence); with this text there is nothing to patch. Meanwhile: which token does SmolLM2 predict after “{text}”?",
        "ko": "패칭에는 토큰 수가 같은 두 줄(깨끗한 문장과 오염된 문장)이 필요합니다. 지금 글로는 패칭할 것이 없습니다. 대신: SmolLM2는 “{text}” 다음에 어떤 토큰을 예측할까요?"},
    "lesson.12.why_one": {
        "en": "“{tok}”, with probability {p}. Add a second line with one word changed and as many tokens to patch between the two.",
        "ko": "확률 {p}로 “{tok}”입니다. 한 단어만 바꾸고 토큰 수가 같은 둘째 줄을 더하면 두 문장 사이를 패칭합니다."},
    "stage.patching.title": {
        "en": "Activation patching: where is the answer made?",
        "ko": "활성 패칭: 답은 어디에서 만들어질까?"},
    "stage.patching.explain.decoder": {
        "en": "The sentence on screen is the **clean** run, the second sentence the **corrupted** one (as many tokens, e.g. one word changed). The clean run's most likely next token is the answer. For every layer and position, the corrupted sentence runs again with the residual stream after that layer, at that one position, copied from the clean run; the cell is the log-probability of the answer at the last position. A bright cell: that position's stream after that layer carries what the answer needs. Typically the changed word's column is bright in the early layers and the last position's in the late ones: the information moves from one token to another on the way up. The heads variant copies one head's output z (pattern · V, every position) instead. Every cell is one more forward pass, run in batches.",
        "ko": "화면의 문장이 **깨끗한** 실행, 두 번째 문장이 **오염된** 실행입니다 (토큰 수가 같아야 함, 예: 한 단어만 바꾼 문장). 깨끗한 실행이 가장 가능성 높다고 본 다음 토큰이 답입니다. 레이어와 위치마다, 오염된 문장을 다시 실행하되 그 레이어를 지난 잔차 스트림의 그 위치 하나만 깨끗한 실행의 것으로 바꿔 넣습니다. 칸의 값은 마지막 위치에서 답의 로그 확률입니다. 밝은 칸: 그 레이어 뒤 그 위치의 스트림이 답에 필요한 것을 담고 있습니다. 보통 앞쪽 레이어에서는 바뀐 단어의 열이, 뒤쪽 레이어에서는 마지막 위치가 밝습니다: 정보가 위로 올라가며 한 토큰에서 다른 토큰으로 옮겨 갑니다. 헤드 버전은 대신 헤드 하나의 출력 z (패턴 · V, 모든 위치)를 바꿔 넣습니다. 칸 하나가 순전파 한 번이며, 묶음(배치)으로 실행합니다."},
    "stage.patching.explain.seed": {
        "en": "The sentence on screen is the **clean** run, the second sentence the **corrupted** one (as many tokens, e.g. one token changed). The model's decoder predicts, so both runs read the same decoder input: the decoder's start token and what the clean run wrote (teacher forcing), cut right after the first place where the corrupted sentence would make it write another token. The answer is the clean run's token there; each cell is its log-probability at the decoder's last position. For every layer and position of the selected block's stack (the encoder: the source's tokens), the corrupted run takes that layer's stream at that one position from the clean run. A bright cell: that position carries what the answer needs. The heads variant copies one head's output z (every position) of the selected block instead. Every cell is one more forward pass, run in batches.",
        "ko": "화면의 문장이 **깨끗한** 실행, 두 번째 문장이 **오염된** 실행입니다 (토큰 수가 같아야 함, 예: 한 토큰만 바꾼 문장). 이 모델은 디코더가 예측하므로 두 실행 모두 같은 디코더 입력을 읽습니다: 디코더의 시작 토큰과 깨끗한 실행이 쓴 토큰들(티처 포싱)을, 오염된 문장이라면 다른 토큰을 쓰게 되는 첫 자리 바로 뒤에서 자른 것입니다. 답은 그 자리에서 깨끗한 실행이 쓴 토큰이고, 각 칸은 디코더의 마지막 위치에서 그 토큰의 로그 확률입니다. 선택한 블록의 스택(인코더라면 입력 토큰들)의 레이어와 위치마다, 오염된 실행에 그 레이어 그 위치 하나의 스트림만 깨끗한 실행의 것을 넣습니다. 밝은 칸: 그 위치가 답에 필요한 것을 담고 있습니다. 헤드 버전은 대신 선택한 블록의 헤드 하나의 출력 z (모든 위치)를 바꿔 넣습니다. 칸 하나가 순전파 한 번이며, 묶음(배치)으로 실행합니다."},
    "patching.needs_head": {
        "en": "an output head (a decoder such as SmolLM2, or the seed model): an encoder alone predicts no token, so patching has no answer to score",
        "ko": "출력 헤드가 있는 (SmolLM2 같은 디코더나 seed 모델) — 인코더만으로는 토큰을 예측하지 않아 패칭이 점수를 매길 답이 없습니다 —"},
    "patching.choose": {
        "en": "Type a second sentence above with as many tokens as this one (e.g. one word changed) to patch between them.",
        "ko": "위에 이 문장과 토큰 수가 같은 두 번째 문장(예: 한 단어만 바꾼 문장)을 입력하면 두 문장 사이를 패칭합니다."},
    "patching.token_count": {
        "en": "Patching needs two sentences with the same number of tokens (position i of one is position i of the other): this one has {a}, the second {b}. Change a word for one of as many tokens.",
        "ko": "패칭에는 토큰 수가 같은 두 문장이 필요합니다 (한 문장의 i번 위치가 다른 문장의 i번 위치): 이 문장은 {a}개, 두 번째 문장은 {b}개입니다. 토큰 수가 같은 단어로 바꿔 보세요."},
    "patching.not_run": {
        "en": "Patching has not run for these two sentences yet: press the button above.",
        "ko": "이 두 문장으로는 아직 패칭을 실행하지 않았습니다: 위의 버튼을 누르세요."},
    "patching.colour": {
        "en": "log p(answer)",
        "ko": "로그 확률(답)"},
    "patching.subtitle": {
        "en": "answer “{answer}” at position {scored}: clean log p {clean}, corrupted {corrupted}; {n} patched forward passes",
        "ko": "답 “{answer}” (위치 {scored}): 깨끗한 실행 로그 확률 {clean}, 오염된 실행 {corrupted}; 패칭한 순전파 {n}번"},
    "patching.kind": {
        "en": "What to patch",
        "ko": "무엇을 패칭할까"},
    "patching.kind_positions": {
        "en": "the stream at one position (layer × position)",
        "ko": "한 위치의 스트림 (레이어 × 위치)"},
    "patching.kind_heads": {
        "en": "one head's output z (layer × head)",
        "ko": "헤드 하나의 출력 z (레이어 × 헤드)"},
    "patching.run": {
        "en": "Run patching ({n} forward passes)",
        "ko": "패칭 실행 (순전파 {n}번)"},
    "patching.cancel": {
        "en": "Cancel",
        "ko": "취소"},
    "patching.cancelled": {
        "en": "Patching was cancelled; nothing was kept. Run it again when you like.",
        "ko": "패칭을 취소했습니다. 아무것도 남기지 않았습니다. 원할 때 다시 실행하세요."},
    "patching.progress": {
        "en": "Patching: {done} of {total} forward passes",
        "ko": "패칭: 순전파 {total}번 중 {done}번"},
    "patching.too_large": {
        "en": "Patching these sentences needs {n} forward passes; this shared server allows at most {bound}. Use shorter sentences (fewer tokens), or run the explorer on your own computer, where there is no bound.",
        "ko": "이 문장들을 패칭하려면 순전파가 {n}번 필요한데, 이 공용 서버는 최대 {bound}번까지만 허용합니다. 더 짧은 문장(토큰 수가 적은)을 쓰거나, 제한이 없는 자기 컴퓨터에서 실행하세요."},
    "patching.failed": {
        "en": "Patching could not run: {error}",
        "ko": "패칭을 실행할 수 없습니다: {error}"},
    "fig.col_logp": {
        "en": "logp",
        "ko": "로그확률"},
    "decoding.temperature": {
        "en": "Temperature (0 = greedy)",
        "ko": "온도 (0 = 그리디)"},
    "decoding.temperature_help": {
        "en": "0 writes the most likely token at every step (greedy, the default). Above 0 the model samples: the logits are divided by the temperature before softmax (below 1 sharper, above 1 flatter), then top-k and top-p cut the candidates, and a token is drawn.",
        "ko": "0이면 매 단계 가장 가능성 높은 토큰을 씁니다 (그리디, 기본값). 0보다 크면 샘플링합니다: 소프트맥스 전에 로짓을 온도로 나누고 (1보다 작으면 더 뾰족하게, 크면 더 평평하게), top-k와 top-p로 후보를 자른 뒤 토큰 하나를 뽑습니다."},
    "decoding.top_k": {
        "en": "Top-k (0 = off)",
        "ko": "top-k (0 = 끔)"},
    "decoding.top_k_help": {
        "en": "Keep only the k most likely tokens; the rest cannot be drawn. Applied before top-p.",
        "ko": "가능성이 가장 높은 토큰 k개만 남기고 나머지는 뽑힐 수 없게 합니다. top-p보다 먼저 적용합니다."},
    "decoding.top_p": {
        "en": "Top-p (1 = off)",
        "ko": "top-p (1 = 끔)"},
    "decoding.top_p_help": {
        "en": "Nucleus sampling: keep the smallest set of the most likely tokens whose probabilities (after temperature and top-k) add up to at least p; the rest cannot be drawn.",
        "ko": "뉴클리어스 샘플링: 가장 가능성 높은 토큰부터 확률(온도와 top-k 적용 후)을 더해 p 이상이 되는 가장 작은 집합만 남기고, 나머지는 뽑힐 수 없게 합니다."},
    "decoding.seed": {
        "en": "Random seed",
        "ko": "난수 시드"},
    "decoding.seed_help": {
        "en": "The same seed draws the same tokens again (the random generator is this decoding's own).",
        "ko": "같은 시드면 같은 토큰을 다시 뽑습니다 (이 디코딩만의 난수 생성기를 씁니다)."},
    "decoding.sampling_note": {
        "en": "Sampled, not greedy: temperature T = {T}, top-k with k = {k}, top-p with p = {p}, random seed {seed}. The candidates show the model's own probabilities (temperature 1); grey ones were cut by top-k or top-p and could not be drawn. The formula's argmax becomes a draw from what is left.",
        "ko": "그리디가 아니라 샘플링했습니다: 온도 T = {T}, top-k의 k = {k}, top-p의 p = {p}, 난수 시드 {seed}. 후보의 확률은 모델 본래의 확률(온도 1)이고, 회색 후보는 top-k나 top-p로 잘려 뽑힐 수 없었습니다. 수식의 argmax 대신 남은 후보 중에서 뽑습니다."},
    "decoding.top_panel_sampled": {
        "en": "next-token candidates, sampled: T = {T} · k = {k} · p = {p} · random seed {seed} (drawn: vermillion; cut: grey)",
        "ko": "다음 토큰 후보, 샘플링: T = {T} · k = {k} · p = {p} · 난수 시드 {seed} (뽑힌 것: 주홍색, 잘린 것: 회색)"},
    "decoding.cut_top_k": {
        "en": "cut by top-k",
        "ko": "top-k로 잘림"},
    "decoding.cut_top_p": {
        "en": "cut by top-p",
        "ko": "top-p로 잘림"},
    # --- models from a folder, configured models (issue 24) --------------------------------------
    "model_path.label": {
        "en": "…or open a folder or .gguf file",
        "ko": "…또는 폴더나 .gguf 파일 열기"},
    "model_path.help": {
        "en": "A model on this computer: a Hugging Face folder (config.json, model.safetensors, tokenizer.json) or a GGUF file. Type its path and press Enter. Only here on your own computer: a hosted server offers the models its host configured.",
        "ko": "이 컴퓨터에 있는 모델: Hugging Face 폴더(config.json, model.safetensors, tokenizer.json)나 GGUF 파일. 경로를 입력하고 Enter를 누르세요. 내 컴퓨터에서만 됩니다: 공개 서버는 운영자가 설정한 모델만 제공합니다."},
    "model_path.option": {
        "en": "{path} (opened from this computer)",
        "ko": "{path} (이 컴퓨터에서 연 모델)"},
    "model_path.missing": {
        "en": "Nothing at `{path}`. Type the path of a model folder (config.json, model.safetensors, tokenizer.json) or of a .gguf file; `~` is your home folder.",
        "ko": "`{path}` 경로에 아무것도 없습니다. 모델 폴더(config.json, model.safetensors, tokenizer.json)나 .gguf 파일의 경로를 입력하세요. `~`는 홈 폴더입니다."},
    "model_path.kind": {
        "en": "`{path}` is neither a folder nor a .gguf (or seed .safetensors) file. Give the folder that holds config.json, or the .gguf file itself.",
        "ko": "`{path}`는 폴더도 .gguf(또는 seed .safetensors) 파일도 아닙니다. config.json이 있는 폴더나 .gguf 파일 자체를 지정하세요."},
    "model_path.error": {
        "en": "`{path}` could not be opened as a model, so the model did not change: {error}",
        "ko": "`{path}`를 모델로 열 수 없어 모델을 바꾸지 않았습니다: {error}"},
    "model_path.config_problem": {
        "en": "The configured models file has a problem (the other models are offered): {problem}",
        "ko": "설정된 모델 파일에 문제가 있습니다 (나머지 모델은 제공됩니다): {problem}"},
    "lessons.model_choice": {
        "en": "Real model shown (instead of the lesson's own)",
        "ko": "보여 줄 실제 모델 (레슨 기본 모델 대신)"},
    "lessons.model_choice_help": {
        "en": "The parts of a lesson that run a real checkpoint (MiniLM, SmolLM2) can run one of the models configured on this server instead, when it has the same kind of stack (an encoder for an encoder part, a decoder for a decoder part).",
        "ko": "실제 체크포인트(MiniLM, SmolLM2)를 실행하는 레슨 부분은, 같은 종류의 스택(인코더 부분이면 인코더, 디코더 부분이면 디코더)을 가진 경우 이 서버에 설정된 모델로 대신 실행할 수 있습니다."},
    "lessons.model_own": {
        "en": "the lesson's own",
        "ko": "레슨 기본 모델"},
    "lessons.model_not_fit": {
        "en": "{model} has no {stack} block, which this part needs; the part shows {own} instead.",
        "ko": "{model} 모델에는 이 부분에 필요한 블록({stack})이 없어 대신 {own} 모델을 보여 줍니다."},
    # words that follow the family on screen (issue 24 item 5, issue 25 item 4): norms, positions, window,
    # QK-norm, scale, feed-forwards; a family the words do not know says so
    "positional.relative": {
        "en": "a learned relative position bias (T5)",
        "ko": "학습된 상대 위치 편향 (T5)"},
    "positional.unknown": {
        "en": "positions of a kind these words do not describe yet",
        "ko": "이 설명이 아직 다루지 않는 종류의 위치 정보"},
    "stage.embedding.title.rotary_scaled": {
        "en": "Token embedding × √d_model (no positional vector: rotary)",
        "ko": "토큰 임베딩 × √d_model (위치 벡터 없음: 회전 위치 인코딩)"},
    "stage.embedding.title.relative": {
        "en": "Token embedding (no positional vector: relative bias)",
        "ko": "토큰 임베딩 (위치 벡터 없음: 상대 위치 편향)"},
    "stage.embedding.title.learned_family": {
        "en": "Embedding + learned positions, then LayerNorm",
        "ko": "임베딩 + 학습된 위치, 그다음 LayerNorm"},
    "stage.embedding.title.unknown": {
        "en": "Token embedding",
        "ko": "토큰 임베딩"},
    "stage.embedding.explain.rotary_scaled": {
        "en": "Each token id picks a row of the embedding matrix E, multiplied by √d_model = {scale}: the same matrix is the output layer, so its rows are small (rms {rms_raw} on this sentence), and the scale brings them to about unit size (rms {rms_e}). No positional vector is added: position enters inside attention instead, where every layer rotates q and k by angles that grow with the position (RoPE).",
        "ko": "각 토큰 id가 임베딩 행렬 E의 한 행을 고르고, √d_model = {scale}을 곱합니다: 같은 행렬이 출력층이기도 해서 행이 작으므로(이 문장에서 rms {rms_raw}) 곱해서 대략 단위 크기(rms {rms_e})로 맞춥니다. 위치 벡터는 더하지 않습니다: 위치는 어텐션 안에서 들어오며, 레이어마다 위치에 따라 커지는 각도로 q와 k를 회전시킵니다(RoPE)."},
    "stage.embedding.explain.relative": {
        "en": "Each token id picks a row of the embedding matrix, and that row enters block 0 as it is: no positional vector is added and nothing is rotated. Position enters inside attention instead: the scores get a learned bias B, one number per head and per bucket of relative distance (key − query; exact for near keys, logarithmic for far ones), made by the first layer of each stack and added in every layer.",
        "ko": "각 토큰 id가 임베딩 행렬의 한 행을 고르고, 그 행이 그대로 0번 블록에 들어갑니다: 위치 벡터를 더하지도, 회전시키지도 않습니다. 위치는 어텐션 안에서 들어옵니다: 점수에 학습된 편향 B를 더하는데, 헤드마다, 상대 거리(키 − 쿼리)의 구간마다 숫자 하나입니다 (가까운 키는 정확히, 먼 키는 로그 간격으로). 스택마다 첫 레이어가 만들고 모든 레이어가 더합니다."},
    "stage.embedding.explain.learned_family": {
        "en": "{family} adds learned vectors per token: {parts}; a LayerNorm then normalises the sum, and that enters block 0. Nothing is multiplied by √d_model: the tables were trained at the size they are used.",
        "ko": "{family}는 토큰마다 학습된 벡터를 더합니다: {parts}. 그다음 LayerNorm이 합을 정규화하고, 그것이 0번 블록에 들어갑니다. √d_model을 곱하지 않습니다: 표들은 쓰이는 크기 그대로 학습되었습니다."},
    "stage.embedding.explain.unknown": {
        "en": "These words do not describe {family}'s embedding yet (positions: {pos}, LayerNorm after the embedding: {norm}); the figure shows what the model added to the stream before block 0.",
        "ko": "이 설명은 아직 {family}의 임베딩을 다루지 않습니다 (위치: {pos}, 임베딩 뒤 LayerNorm: {norm}). 그림은 모델이 0번 블록 전에 스트림에 더한 것을 보여 줍니다."},
    "embedding.parts_type": {
        "en": "its word embedding, a token-type embedding (type 0 here: one sentence per row) and the position embedding of its place",
        "ko": "단어 임베딩, 토큰 타입 임베딩(여기서는 타입 0: 한 행에 한 문장), 그리고 자리의 위치 임베딩"},
    "embedding.parts_no_type": {
        "en": "its word embedding and the position embedding of its place (no token-type embedding)",
        "ko": "단어 임베딩과 자리의 위치 임베딩 (토큰 타입 임베딩 없음)"},
    "embedding.position_offset": {
        "en": " (the position table starts {offset} rows in: position i reads row i + {offset})",
        "ko": " (위치 표는 {offset}행 뒤에서 시작합니다: 위치 i는 i + {offset}번 행을 읽습니다)"},
    "tx.relative_bias": {
        "en": "no positional vector: a relative bias is added to the scores",
        "ko": "위치 벡터 없음: 점수에 상대 위치 편향을 더함"},
    "tx.not_scaled": {
        "en": "not scaled",
        "ko": "스케일링 없음"},
    "tx.window": {
        "en": "window",
        "ko": "윈도"},
    "stage.pe_heatmap.explain.sinusoidal_split": {
        "en": "Every position gets a fixed pattern of sines and cosines (n = {n}, d_model = {d}), laid out as Marian does: the sines of every frequency in the first half of the dimensions, their cosines in the second half (the paper interleaves them). In each half, low dimensions change quickly from one position to the next, high dimensions slowly.",
        "ko": "각 위치는 고정된 사인·코사인 패턴을 받습니다 (n = {n}, d_model = {d}). Marian의 배치대로 모든 주파수의 사인이 차원의 앞 절반에, 코사인이 뒤 절반에 있습니다 (논문은 번갈아 놓습니다). 각 절반에서 낮은 차원은 위치마다 빠르게, 높은 차원은 느리게 변합니다."},
    "stage.pe_heatmap.explain.learned_offset": {
        "en": "This model learned one vector per position: a table of {rows} usable rows, trained with the rest of the model. RoBERTa's rows start after the padding row: position i reads row i + pad id + 1, so this sentence's {T} positions use the rows just after it. There is no formula and no sines or cosines: the rows are whatever training made of them.",
        "ko": "이 모델은 위치마다 벡터 하나를 학습했습니다: 쓸 수 있는 행 {rows}개짜리 표로, 모델의 나머지와 함께 학습되었습니다. RoBERTa의 행은 패딩 행 다음에서 시작합니다: 위치 i는 i + 패딩 id + 1번 행을 읽으므로, 이 문장의 위치 {T}개는 그 바로 뒤의 행들을 씁니다. 공식도, 사인·코사인도 없습니다: 행은 학습이 만든 그대로입니다."},
    "rope.local": {
        "en": "local (sliding-window)",
        "ko": "지역(슬라이딩 윈도)"},
    "rope.global": {
        "en": "global (full attention)",
        "ko": "전역(전체 어텐션)"},
    "rope.layer_base": {
        "en": "Layer {layer} is a {kind} layer: its rotary base is {n}; {other} layers ({layers}) use {m}.",
        "ko": "{layer}번 레이어는 {kind} 레이어로, 회전 밑이 {n}입니다. {other} 레이어({layers})는 {m}을 씁니다."},
    "rope.scaled": {
        "en": "The frequencies are those the model uses, after its rope's {kind} scaling (factor {factor}).",
        "ko": "주파수는 모델이 실제로 쓰는 값으로, 로프의 {kind} 스케일링(배율 {factor})을 거친 것입니다."},
    "rope.partial": {
        "en": "Only the first {r} of the {d} dimensions of each head are rotated; the other {rest} carry no position.",
        "ko": "각 헤드의 차원 {d}개 중 앞의 {r}개만 회전합니다. 나머지 {rest}개는 위치 정보를 담지 않습니다."},
    "stage.gqa.title.mqa": {
        "en": "Multi-query attention: one K/V head for every query head",
        "ko": "멀티 쿼리 어텐션: 모든 쿼리 헤드에 K/V 헤드 하나"},
    "stage.gqa.explain.mqa": {
        "en": "All {h} query heads read one and the same key/value head (multi-query attention, the extreme of grouped-query attention): the model stores one key and one value per token and layer instead of {h}. Each query head still has its own W_Q, so the heads ask different questions of the same keys. Each column is a query head; its cell shows the K/V head it reads.",
        "ko": "쿼리 헤드 {h}개가 모두 같은 키/밸류 헤드 하나를 읽습니다 (멀티 쿼리 어텐션, 그룹 쿼리 어텐션의 극단): 모델은 토큰과 레이어마다 키와 밸류를 {h}개가 아니라 하나씩만 저장합니다. 쿼리 헤드마다 W_Q는 따로 있어서, 헤드들은 같은 키에 서로 다른 질문을 합니다. 각 열은 쿼리 헤드이고, 칸은 그 헤드가 읽는 K/V 헤드입니다."},
    "stage.qkv.explain.self_pre": {
        "en": "Every token asks a question (its query), offers a label (its key) and carries content (its value). The stream X entering layer {layer} is normalised first ({norm}, before the sublayer: pre-norm), and Q, K and V all come from that normalised X̂; the stream itself goes on unnormalised.",
        "ko": "각 토큰은 질문(쿼리)을 던지고, 이름표(키)를 내밀고, 내용(밸류)을 담습니다. {layer}번 레이어에 들어오는 스트림 X를 먼저 정규화하고({norm}, 서브레이어 앞: 프리 노름), Q, K, V는 모두 그 정규화된 X̂에서 나옵니다. 스트림 자체는 정규화되지 않은 채 이어집니다."},
    "stage.qkv.explain.rotary_family": {
        "en": "Every token asks a question (its query), offers a label (its key) and carries content (its value). The stream X entering layer {layer} is normalised first ({norm}, before the sublayer).{qk} Then q and k are rotated by their position (RoPE{partial}, base {base} in this layer), v is not. {bias}",
        "ko": "각 토큰은 질문(쿼리)을 던지고, 이름표(키)를 내밀고, 내용(밸류)을 담습니다. {layer}번 레이어에 들어오는 스트림 X를 먼저 정규화합니다({norm}, 서브레이어 앞).{qk} 그다음 q와 k를 위치에 따라 회전시키고(RoPE{partial}, 이 레이어의 밑 {base}), v는 회전시키지 않습니다. {bias}"},
    "qkv.qk_norm": {
        "en": " Each head's q and k are then normalised again on their own ({norm} over d_k: QK-norm), before the rotation.",
        "ko": " 그다음 각 헤드의 q와 k를 따로 한 번 더 정규화합니다 (d_k에 대한 {norm}: QK 노름). 회전 전입니다."},
    "qkv.partial": {
        "en": ": only the first {r} of {d} dimensions",
        "ko": ": 차원 {d}개 중 앞의 {r}개만"},
    "qkv.bias": {
        "en": "W_Q, W_K and W_V have a bias.",
        "ko": "W_Q, W_K, W_V에는 편향이 있습니다."},
    "qkv.no_bias": {
        "en": "This model's projections have no bias.",
        "ko": "이 모델의 투영에는 편향이 없습니다."},
    "stage.qk_norm.title": {
        "en": "QK-norm: q and k before and after their norm",
        "ko": "QK 노름: 정규화 전후의 q와 k"},
    "stage.qk_norm.explain": {
        "en": "This model normalises each head's query and key ({norm} over the d_k numbers of the head) before the rotation and the dot product. A norm fixes each vector's size (rms about |γ|), so a score q·k can only grow as far as the learned γ let it, however large the projections become: the softmax stays out of saturation without relying on 1/√d_k alone. Here (this head, and its K/V head {kv}): before the norm q and k have rms {rms_q} and {rms_k}, and the largest |score| would be {before}; after it, {after}.",
        "ko": "이 모델은 회전과 내적 전에 각 헤드의 쿼리와 키를 정규화합니다(헤드의 d_k개 숫자에 대한 {norm}). 노름은 벡터의 크기(rms가 대략 |γ|)를 고정하므로, 투영이 아무리 커져도 점수 q·k는 학습된 γ가 허락하는 만큼만 커집니다: 1/√d_k에만 기대지 않고도 소프트맥스가 포화되지 않습니다. 여기서(이 헤드의 K/V 헤드 {kv}) 노름 전 q와 k의 rms는 {rms_q}, {rms_k}이고 가장 큰 |점수|는 {before}였을 것이며, 노름 뒤에는 {after}입니다."},
    "qk_norm.needs": {
        "en": "QK-norm (a norm on each head's q and k)",
        "ko": "QK 노름(각 헤드의 q와 k에 대한 정규화)이 있는"},
    "fig.qk_q_panel": {
        "en": "query q of this head: rms per position",
        "ko": "이 헤드의 쿼리 q: 위치별 rms"},
    "fig.qk_k_panel": {
        "en": "key k of its K/V head: rms per position",
        "ko": "이 헤드가 읽는 K/V 헤드의 키 k: 위치별 rms"},
    "fig.qk_scores_panel": {
        "en": "largest |score| per query (without rotary)",
        "ko": "쿼리별 가장 큰 |점수| (회전 없이)"},
    "fig.qk_before": {
        "en": "before the norm",
        "ko": "노름 전"},
    "fig.qk_after": {
        "en": "after the norm",
        "ko": "노름 뒤"},
    "fig.qk_rms": {
        "en": "rms",
        "ko": "rms"},
    "fig.qk_largest": {
        "en": "largest |score|",
        "ko": "가장 큰 |점수|"},
    "stage.scaled.title.none": {
        "en": "Scores Q·Kᵀ, not scaled",
        "ko": "점수 Q·Kᵀ, 스케일링 없음"},
    "stage.scaled.title.custom": {
        "en": "Scaled scores Q·Kᵀ · s",
        "ko": "스케일링한 점수 Q·Kᵀ · s"},
    "stage.scaled.explain.none": {
        "en": "This model does not divide by √d_k (= √{k} ≈ {sqrt}): its scores are q·k as they are (scale 1). T5 folds the scaling into how W_Q was initialised and trained, so the scores are already in a range softmax can use. Both panels have the same colour range and show the same numbers.",
        "ko": "이 모델은 √d_k(= √{k} ≈ {sqrt})로 나누지 않습니다: 점수는 q·k 그대로입니다(스케일 1). T5는 스케일링을 W_Q의 초기화와 학습에 넣어 두어서, 점수가 이미 소프트맥스가 쓸 수 있는 범위에 있습니다. 두 그림은 같은 색 범위로 같은 숫자를 보여 줍니다."},
    "stage.scaled.explain.custom": {
        "en": "This model multiplies the scores by its own scale s = {scale}, set in its configuration, instead of 1/√d_k = 1/√{k} ≈ {inv}. Same colour range as Q·Kᵀ.",
        "ko": "이 모델은 점수에 1/√d_k = 1/√{k} ≈ {inv} 대신 설정에 정해진 자기 스케일 s = {scale}을 곱합니다. Q·Kᵀ와 같은 색 범위로 그렸습니다."},
    "stage.mask.title.window": {
        "en": "Masks: padding, causal, sliding window, combined",
        "ko": "마스크: 패딩, 인과, 슬라이딩 윈도, 합친 것"},
    "stage.mask.explain.window": {
        "en": "The padding mask hides pad keys; the causal mask stops each position from seeing later ones; and this layer is a local one, with a sliding window: each query sees only itself and the {w1} keys before it ({w} keys), so earlier keys are hidden too (the band). The block uses the three together. The window keeps the cost of a layer linear in the length, and the global layers still see everything before.",
        "ko": "패딩 마스크는 패딩 키를 가리고, 인과 마스크는 각 위치가 뒤의 위치를 보지 못하게 합니다. 그리고 이 레이어는 슬라이딩 윈도가 있는 지역 레이어입니다: 각 쿼리는 자신과 그 앞의 키 {w1}개(키 {w}개)만 보므로, 더 앞의 키도 가려집니다 (띠 모양). 이 블록은 셋을 함께 씁니다. 윈도 덕분에 레이어의 비용이 길이에 선형으로 늘고, 전역 레이어는 여전히 앞의 모든 것을 봅니다."},
    "mask.window_all": {
        "en": "Every layer of this model has a sliding window of {w} keys (the query and the {w1} before it).",
        "ko": "이 모델의 모든 레이어에 키 {w}개(쿼리와 그 앞의 {w1}개)의 슬라이딩 윈도가 있습니다."},
    "mask.window_layers": {
        "en": "Sliding window of {w} keys (the query and the {w1} before it) on the local layers {local}; the global layers {other} see every earlier key. Layer {layer} is {kind}.",
        "ko": "지역 레이어 {local}에는 키 {w}개(쿼리와 그 앞의 {w1}개)의 슬라이딩 윈도가 있고, 전역 레이어 {other}는 앞의 모든 키를 봅니다. {layer}번 레이어는 {kind} 레이어입니다."},
    "mask.window_hint": {
        "en": "In What if, window=N (e.g. window=2) shrinks the window so that a short sentence shows the band, and shows what that does to the next token.",
        "ko": "What if에서 window=N(예: window=2)으로 윈도를 줄이면 짧은 문장에서도 띠가 보이고, 다음 토큰에 어떤 영향을 주는지 볼 수 있습니다."},
    "fig.mask_window": {
        "en": "sliding\nwindow ({w})",
        "ko": "슬라이딩\n윈도 ({w})"},
    "fig.outside_window": {
        "en": "blocked: outside the window",
        "ko": "차단: 윈도 밖"},
    "fig.cat_window": {
        "en": "outside the window",
        "ko": "윈도 밖"},
    "masked.relative_bias": {
        "en": "T5 adds its relative position bias B here, before the mask: one learned number per head and bucket of distance (key − query), the same in every layer of the stack (hook_position_bias). A What if no_position sets it to 0.",
        "ko": "T5는 여기서, 마스크 전에 상대 위치 편향 B를 더합니다: 헤드와 거리(키 − 쿼리) 구간마다 학습된 숫자 하나이고, 스택의 모든 레이어에서 같습니다 (hook_position_bias). What if의 no_position은 이것을 0으로 만듭니다."},
    "masked.softcap": {
        "en": "Before the mask this model caps the scores softly: c·tanh(score / c) with c = {c}, so no score goes beyond ±{c} (hook_capped_scores).",
        "ko": "이 모델은 마스크 전에 점수를 부드럽게 제한합니다: c = {c}인 c·tanh(점수 / c)라서 어떤 점수도 ±{c}를 넘지 않습니다 (hook_capped_scores)."},
    "chain.self_sublayer_pre": {"en": "Y: after the masked self-attention sublayer (added to X, not normalised)",
                                "ko": "Y: 마스크드 셀프 어텐션 서브레이어 다음 (X에 더함, 정규화 안 함)"},
    "chain.norm_in": {"en": "{norm}(X): what the attention reads", "ko": "{norm}(X): 어텐션이 읽는 것"},
    "chain.norm_in_cross": {"en": "{norm}(Y): what the cross-attention reads", "ko": "{norm}(Y): 크로스 어텐션이 읽는 것"},
    "chain.qk_norm": {"en": "QK-norm: each head's q and k normed ({norm} over d_k) before the rotation",
                      "ko": "QK 노름: 회전 전에 각 헤드의 q와 k를 정규화 (d_k에 대한 {norm})"},
    "chain.scores_unscaled": {"en": "scores Q·Kᵀ (not scaled)", "ko": "점수 Q·Kᵀ (스케일링 없음)"},
    "chain.scores_custom": {"en": "scores Q·Kᵀ · {s}", "ko": "점수 Q·Kᵀ · {s}"},
    "chain.softcap": {"en": "soft cap: {cap}·tanh(scores / {cap})", "ko": "부드러운 제한: {cap}·tanh(점수 / {cap})"},
    "chain.position_bias": {"en": "+ relative position bias B (per head and distance bucket)",
                            "ko": "+ 상대 위치 편향 B (헤드와 거리 구간마다)"},
    "chain.mask_window": {"en": "padding ∧ causal ∧ sliding window of {w} keys (one for all heads)",
                          "ko": "패딩 ∧ 인과 ∧ 키 {w}개의 슬라이딩 윈도 (모든 헤드에 하나)"},
    "chain.post_norm_attn": {"en": "{norm} of the attention output (sandwich: a norm after the sublayer too)",
                             "ko": "어텐션 출력의 {norm} (샌드위치: 서브레이어 뒤에도 노름)"},
    "chain.add_cross": {"en": "add: Y + cross-attention (not normalised)", "ko": "잔차 연결: Y + 크로스 어텐션 (정규화 안 함)"},
    "chain.cross_sublayer_pre": {"en": "cross-attention sublayer ({norm} first; keys, values: the encoder's output H), added",
                                 "ko": "크로스 어텐션 서브레이어 (먼저 {norm}, 키와 밸류: 인코더 출력 H), 더함"},
    "chain.norm_ffn": {"en": "{norm}: what the feed-forward reads", "ko": "{norm}: 피드포워드가 읽는 것"},
    "chain.post_norm_ffn": {"en": "{norm} of the feed-forward output (sandwich)", "ko": "피드포워드 출력의 {norm} (샌드위치)"},
    "chain.final_norm_named": {"en": "final {norm}", "ko": "마지막 {norm}"},
    "stage.ffn.explain.geglu": {
        "en": "After attention every position goes through the same network on its own (no position reads another): two projections from d_model = {d} to d_ff = {d_ff}, one through {act}'s GELU acting as a gate on the other (element by element), then W_down back to d_model. {bias} Its input is {input}. Here (layer {layer}) {neg}% of the hidden values are negative.",
        "ko": "어텐션 다음에 각 위치는 같은 네트워크를 따로 거칩니다 (다른 위치를 읽지 않음): d_model = {d}에서 d_ff = {d_ff}로 가는 투영 두 개 중 하나가 {act}의 GELU를 거쳐 다른 하나의 게이트가 되고(원소별), W_down으로 d_model에 돌아옵니다. {bias} 입력은 {input}입니다. 여기서({layer}번 레이어) 은닉값의 {neg}%가 음수입니다."},
    "stage.ffn.explain.unknown": {
        "en": "These words do not describe this feed-forward yet ({act}, from {family}); the figure shows its hidden values (d_ff = {d_ff}) and its output as the model computed them. Its input is {input}.",
        "ko": "이 설명은 아직 이 피드포워드를 다루지 않습니다 ({family}의 {act}). 그림은 모델이 계산한 은닉값(d_ff = {d_ff})과 출력을 보여 줍니다. 입력은 {input}입니다."},
    "ffn.bias": {
        "en": "Its projections have biases.",
        "ko": "투영에는 편향이 있습니다."},
    "ffn.no_bias": {
        "en": "No biases.",
        "ko": "편향은 없습니다."},
    "ffn_input_pre_norm": {
        "en": "{norm} of the stream (the stream itself is not normalised)",
        "ko": "스트림의 {norm} (스트림 자체는 정규화하지 않음)"},
    "ffn_input_sandwich": {
        "en": "{norm} of the stream; its output is normalised again by a second {norm} before it is added back",
        "ko": "스트림의 {norm}. 출력은 다시 더해지기 전에 두 번째 {norm}으로 한 번 더 정규화됩니다"},
    "stage.residual_norm.explain.pre_ln": {
        "en": "This model normalises before each sublayer (pre-norm, as GPT-2 does): the sublayer reads LayerNorm(x), and its output is added to the stream x itself, which is never normalised on its way through the blocks. LayerNorm subtracts each position's mean μ, divides by its standard deviation σ, then scales by γ and shifts by β (both learned). The panels follow layer {layer} in order; the bottom plot shows μ and σ of each norm's input per position. {extra}",
        "ko": "이 모델은 각 서브레이어 앞에서 정규화합니다 (GPT-2처럼 프리 노름): 서브레이어는 LayerNorm(x)을 읽고, 그 출력은 스트림 x 자체에 더해지며, 스트림은 블록을 지나는 동안 정규화되지 않습니다. LayerNorm은 위치마다 평균 μ를 빼고 표준편차 σ로 나눈 뒤 γ를 곱하고 β를 더합니다 (둘 다 학습됨). 패널은 {layer}번 레이어를 순서대로 따라가고, 아래 그림은 각 노름 입력의 위치별 μ와 σ입니다. {extra}"},
    "stage.residual_norm.explain.sandwich": {
        "en": "Gemma normalises on both sides of each sublayer (a sandwich): the sublayer reads RMSNorm(x), its output is normalised again by a second RMSNorm, and only then added to the stream x, which is itself never normalised. Gemma's RMSNorm scales by (1 + γ) instead of γ (its γ are stored around 0; a GGUF file stores 1 + γ itself). The panels follow layer {layer} in order; the bottom plot shows the root mean square of each of the four norms' inputs per position. {extra}",
        "ko": "Gemma는 각 서브레이어의 양쪽에서 정규화합니다 (샌드위치): 서브레이어는 RMSNorm(x)을 읽고, 그 출력을 두 번째 RMSNorm으로 다시 정규화한 뒤에야 스트림 x에 더하며, 스트림 자체는 정규화되지 않습니다. Gemma의 RMSNorm은 γ 대신 (1 + γ)를 곱합니다 (γ는 0 근처로 저장되며, GGUF 파일은 1 + γ 자체를 저장함). 패널은 {layer}번 레이어를 순서대로 따라가고, 아래 그림은 노름 네 개 각각의 입력의 위치별 제곱평균제곱근입니다. {extra}"},
    "stage.residual_norm.explain.unknown": {
        "en": "These words do not describe this model's normalisation yet ({norm}, from {family}); the panels show the stream and the norms' inputs as the model computed them. {extra}",
        "ko": "이 설명은 아직 이 모델의 정규화를 다루지 않습니다 ({family}의 {norm}). 패널은 모델이 계산한 스트림과 노름 입력을 보여 줍니다. {extra}"},
    "whatif.output_note_family_decoder": {
        "en": "The {family} model's probabilities for the token after the sentence's last token. KL(① ‖ ②) says how far the edited distribution is from the intact one, in nats (0: the same).",
        "ko": "{family} 모델이 문장의 마지막 토큰 다음 토큰에 준 확률입니다. KL(① ‖ ②)은 편집한 분포가 원래 분포에서 얼마나 먼지를 nat 단위로 나타냅니다 (0: 같음)."},
    "whatif.output_note_family_encoder": {
        "en": "The {family} model's sentence embedding: the mean of the last layer's vectors over the real tokens, normalised. cos = 1: the edits changed nothing.",
        "ko": "{family} 모델의 문장 임베딩: 실제 토큰에 대한 마지막 레이어 벡터의 평균을 정규화한 것입니다. cos = 1이면 편집이 아무것도 바꾸지 않은 것입니다."},
    "whatif.output_note_family_seq2seq": {
        "en": "The {family} model writes greedily, one token at a time, reading what it has written; under the edits it writes again from the start, so one changed step changes what follows. The first character that differs is outlined.",
        "ko": "{family} 모델은 자기가 쓴 것을 읽으며 한 번에 토큰 하나씩 그리디하게 씁니다. 편집하면 처음부터 다시 쓰므로, 한 단계가 바뀌면 뒤도 바뀝니다. 처음으로 달라진 글자에 테두리를 칩니다."},
    "lesson.11.gemma3": {
        "en": "Gemma 3 (270M, today's design), layer 0, a local layer: its window is 512 tokens, longer than this sentence, so the What if shrinks it to 4 (window=4): the band appears in the weights (right). Below: q and k before and after QK-norm.",
        "ko": "Gemma 3 (270M, 오늘날의 설계), 0번 레이어(지역 레이어): 윈도가 512 토큰으로 이 문장보다 길어서, What if로 4로 줄였습니다 (window=4): 가중치에 띠가 나타납니다 (오른쪽). 아래: QK 노름 전후의 q와 k."},
    "stage.position_bias.title": {
        "en": "Relative position bias B (T5)",
        "ko": "상대 위치 편향 B (T5)"},
    "stage.position_bias.explain.encoder": {
        "en": "T5 adds no positional vector: each self-attention adds to its scores a learned number per head and per bucket of the distance j − i from query to key. Near distances have a bucket each, far ones share buckets on a logarithmic scale up to a largest distance; in the encoder a key before and a key after the query fall in different buckets, so the head can prefer one side. The first layer holds the table and every layer of the stack adds the same B. This head: from {lo} to {hi}; on the diagonal (a token and itself) {near} on average.",
        "ko": "T5는 위치 벡터를 더하지 않습니다: 각 셀프 어텐션이 점수에, 헤드마다 그리고 쿼리에서 키까지의 거리 j − i 구간마다 학습된 숫자 하나를 더합니다. 가까운 거리는 구간이 하나씩이고, 먼 거리는 가장 먼 거리까지 로그 간격의 구간을 나눠 씁니다. 인코더에서는 쿼리 앞의 키와 뒤의 키가 다른 구간이라 헤드가 한쪽을 더 좋아할 수 있습니다. 첫 레이어가 표를 가지고 스택의 모든 레이어가 같은 B를 더합니다. 이 헤드: {lo}부터 {hi}까지, 대각선(토큰과 자기 자신)은 평균 {near}."},
    "stage.position_bias.explain.decoder": {
        "en": "T5 adds no positional vector: each self-attention adds to its scores a learned number per head and per bucket of the distance from query to key. Near distances have a bucket each, far ones share buckets on a logarithmic scale up to a largest distance; in the decoder only earlier keys count (later ones are masked and share one bucket). The first layer holds the table and every layer of the stack adds the same B. This head: from {lo} to {hi}; on the diagonal (a token and itself) {near} on average.",
        "ko": "T5는 위치 벡터를 더하지 않습니다: 각 셀프 어텐션이 점수에, 헤드마다 그리고 쿼리에서 키까지의 거리 구간마다 학습된 숫자 하나를 더합니다. 가까운 거리는 구간이 하나씩이고, 먼 거리는 가장 먼 거리까지 로그 간격의 구간을 나눠 씁니다. 디코더에서는 앞의 키만 의미가 있습니다 (뒤의 키는 가려지고 구간 하나를 함께 씀). 첫 레이어가 표를 가지고 스택의 모든 레이어가 같은 B를 더합니다. 이 헤드: {lo}부터 {hi}까지, 대각선(토큰과 자기 자신)은 평균 {near}."},
    "needs.relative_bias": {
        "en": "a relative position bias (T5)",
        "ko": "상대 위치 편향(T5)이 있는"},
    "norm_extra_final": {
        "en": "After the last block one more {norm} comes before the output layer.",
        "ko": "마지막 블록 다음, 출력층 전에 {norm}이 하나 더 있습니다."},
}


def lang_or_default(lang: str | None) -> str:
    return lang if lang in LANGS else "en"


def t(key: str, lang: str = "en", **kw) -> str:
    """The catalogue's ``key`` in ``lang`` with ``{placeholders}`` filled in (KeyError if unknown:
    a misspelt key fails loudly instead of showing itself on the page)."""
    text = WORDS[key][lang_or_default(lang)]
    return text.format(**kw) if kw else text


_FIG_LABELS: dict[str, dict[str, str]] = {}


def fig_labels(lang: str = "en") -> dict[str, str]:
    """The figure and table labels ("fig.*" keys, without the prefix) in ``lang`` (a copy of the
    language's labels, gathered once: a page asks for them for every figure and caption)."""
    lang = lang_or_default(lang)
    labels = _FIG_LABELS.get(lang)
    if labels is None:
        labels = _FIG_LABELS[lang] = {k[4:]: v[lang] for k, v in WORDS.items() if k.startswith("fig.")}
    return dict(labels)


def stage_text(stage_id: str, lang: str = "en") -> dict[str, str]:
    """{"title", "explain"} of one stage in ``lang``, as templates: a stage whose words follow the model
    has one explanation per variant (stage.{id}.explain.{variant}); this gives the first of them. The
    words for a model and a run: ``explorer.views.stages.stage_words``."""
    key = f"stage.{stage_id}.explain"
    if key not in WORDS:
        key = next(k for k in WORDS if k.startswith(key + "."))
    return {"title": t(f"stage.{stage_id}.title", lang), "explain": t(key, lang)}
