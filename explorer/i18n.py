"""Every word the app and its figures show, in English (default) and Korean.

    t("layer", "ko")                      -> "층"
    stage_text("softmax", "ko")["explain"]
    fig_labels("ko")["query"]             -> "쿼리"
"""
from __future__ import annotations

LANGS = ("en", "ko")
LANG_NAMES = {"en": "English", "ko": "한국어"}

UI: dict[str, dict[str, str]] = {
    "app_title": {"en": "Attention Explorer", "ko": "어텐션 탐색기"},
    "tagline": {"en": "Every stage of attention, computed live from hook points inside the model.",
                "ko": "모델 안의 훅 지점에서 실시간으로 계산한, 어텐션의 모든 단계."},
    "language": {"en": "Language", "ko": "언어"},
    "model": {"en": "Model", "ko": "모델"},
    "text": {"en": "Sentences (one per line)", "ko": "문장 (한 줄에 한 문장)"},
    "text_help": {"en": "Each line is one sentence; several lines form a padded batch. "
                        "Limits: {n} sentences, {c} characters and {t} tokens per sentence.",
                  "ko": "한 줄이 한 문장이며, 여러 줄은 패딩된 배치가 됩니다. "
                        "한도: 문장 {n}개, 문장마다 {c}자·토큰 {t}개."},
    "example": {"en": "Load an example", "ko": "예문 불러오기"},
    "example_none": {"en": "—", "ko": "—"},
    "sentence": {"en": "Sentence of the batch", "ko": "배치에서 볼 문장"},
    "block": {"en": "Attention block", "ko": "어텐션 블록"},
    "layer": {"en": "Layer", "ko": "층"},
    "head": {"en": "Head", "ko": "헤드"},
    "only_one": {"en": "{what}: 0 (the model has only one)", "ko": "{what}: 0 (모델에 하나뿐)"},
    "query_token": {"en": "Query token (row i)", "ko": "쿼리 토큰 (행 i)"},
    "key_token": {"en": "Key token (column j)", "ko": "키 토큰 (열 j)"},
    "pe_base": {"en": "Base n", "ko": "밑 n"},
    "pe_d_model": {"en": "d_model", "ko": "d_model"},
    "pe_positions": {"en": "Positions", "ko": "위치 개수"},
    "pe_dims": {"en": "Dimensions to draw", "ko": "그릴 차원"},
    "pe_controls": {"en": "Try other settings (for comparing, e.g. n = 10000 with n = 100)",
                    "ko": "다른 설정으로 그려 보기 (예: n = 10000과 n = 100 비교)"},
    "pe_model_note": {"en": "Above: the encoding the model actually added (n = {n}, d_model = {d}).",
                      "ko": "위: 모델이 실제로 더한 인코딩 (n = {n}, d_model = {d})."},
    "section_tokens": {"en": "Tokens", "ko": "토큰"},
    "section_position": {"en": "Position", "ko": "위치"},
    "section_qkv": {"en": "Q · K · V", "ko": "Q · K · V"},
    "section_scores": {"en": "Scores & masks", "ko": "점수와 마스크"},
    "section_output": {"en": "Output", "ko": "출력"},
    "section_cell": {"en": "One cell", "ko": "한 칸"},
    "section_overview": {"en": "All heads", "ko": "모든 헤드"},
    "section_all": {"en": "Everything", "ko": "전체"},
    "view": {"en": "View", "ko": "보기"},
    "table": {"en": "Numbers (table)", "ko": "숫자 (표)"},
    "csv": {"en": "Download CSV", "ko": "CSV 다운로드"},
    "formula": {"en": "Formula", "ko": "수식"},
    "input": {"en": "input", "ko": "입력"},
    "output": {"en": "generated", "ko": "생성 결과"},
    "generated_title": {"en": "What the model wrote (task: {task})", "ko": "모델이 쓴 것 (과제: {task})"},
    "generated_empty": {"en": "(nothing: the model stopped at once)", "ko": "(없음: 바로 멈췄습니다)"},
    "current": {"en": "Showing sentence {i}", "ko": "{i}번 문장을 보는 중"},
    "empty": {"en": "Type a sentence in the sidebar to begin — for example `hello world` or "
                    "`안녕하세요`. Each line is one sentence.",
              "ko": "왼쪽에 문장을 입력하면 시작합니다 — 예: `hello world` 또는 `안녕하세요`. "
                    "한 줄이 한 문장입니다."},
    "too_many": {"en": "Only the first {n} sentences are used ({m} were given).",
                 "ko": "처음 {n}개 문장만 사용합니다 ({m}개 입력됨)."},
    "too_long": {"en": "Sentence {i} was cut to {n} characters.",
                 "ko": "{i}번 문장을 {n}자로 잘랐습니다."},
    "too_many_tokens": {"en": "Sentence {i} was cut to {n} tokens.",
                        "ko": "{i}번 문장을 토큰 {n}개로 잘랐습니다."},
    "bad_param": {"en": "Ignored the link's `{name}={value}`: {why}",
                  "ko": "링크의 `{name}={value}` 값을 무시했습니다: {why}"},
    "clipped_param": {"en": "The link's `{name}={value}` is out of range; using {used}.",
                      "ko": "링크의 `{name}={value}` 값이 범위를 벗어나 {used}(으)로 바꿨습니다."},
    "why_model": {"en": "unknown model (choose one of {choices})", "ko": "알 수 없는 모델 ({choices} 중 하나)"},
    "why_int": {"en": "not a whole number", "ko": "정수가 아닙니다"},
    "why_choice": {"en": "choose one of {choices}", "ko": "{choices} 중 하나를 고르세요"},
    "weights_missing": {"en": "The trained weights for **{name}** are not available: {error}",
                        "ko": "**{name}**의 학습된 가중치를 쓸 수 없습니다: {error}"},
    "fallback": {"en": "Showing the untrained seed Transformer (random weights) meanwhile: every stage "
                       "works, but the patterns are not meaningful yet.",
                 "ko": "대신 학습하지 않은 seed 트랜스포머(무작위 가중치)를 보여 줍니다: 모든 단계는 "
                       "동작하지만 패턴에는 아직 의미가 없습니다."},
    "model_error": {"en": "Model **{name}** could not be loaded: {error}",
                    "ko": "**{name}** 모델을 불러오지 못했습니다: {error}"},
    "choose_other": {"en": "Choose another model in the sidebar.", "ko": "왼쪽에서 다른 모델을 고르세요."},
    "crash": {"en": "Something went wrong while drawing this page ({kind}). Try another sentence, "
                    "layer or head; if it keeps happening, please report it with the page's link.",
              "ko": "페이지를 그리다가 문제가 생겼습니다 ({kind}). 다른 문장·층·헤드를 골라 보세요. "
                    "계속되면 이 페이지의 링크와 함께 알려 주세요."},
    "stage_error": {"en": "This figure could not be drawn ({kind}: {msg}).",
                    "ko": "이 그림을 그리지 못했습니다 ({kind}: {msg})."},
    "running": {"en": "Running the model…", "ko": "모델 실행 중…"},
    "drill": {"en": "Open this head", "ko": "이 헤드 열기"},
    "drill_pick": {"en": "Head to open", "ko": "열어 볼 헤드"},
    "overview_note": {"en": "H = mean entropy of a row (nats; low = focused), d = mean distance |i − j| "
                            "between a query and the keys it attends to.",
                      "ko": "H = 행의 평균 엔트로피 (nat; 낮을수록 집중), d = 쿼리와 그것이 주목하는 "
                            "키 사이의 평균 거리 |i − j|."},
    "overview_window": {"en": "Showing layers {a}–{b} of {n} (around the chosen layer).",
                        "ko": "전체 {n}개 층 중 {a}–{b}층을 보여 줍니다 (고른 층 주변)."},
    "cell_check": {"en": "Check: the hook's score is {hs}, the recomputed one {rs}; the hook's weight is "
                         "{hw}, the recomputed one {rw}.",
                   "ko": "확인: 훅의 점수 {hs}, 다시 계산한 점수 {rs}; 훅의 가중치 {hw}, 다시 계산한 "
                         "가중치 {rw}."},
    "limits": {"en": "Limits", "ko": "한도"},
    "untrained": {"en": "untrained", "ko": "학습 안 됨"},
    "blocks.encoder.self_attn": {"en": "encoder self-attention", "ko": "인코더 셀프 어텐션"},
    "blocks.decoder.self_attn": {"en": "decoder masked self-attention", "ko": "디코더 마스크드 셀프 어텐션"},
    "blocks.decoder.cross_attn": {"en": "cross-attention (decoder → encoder)",
                                  "ko": "크로스 어텐션 (디코더 → 인코더)"},
    "models.seed": {"en": "seed Transformer (reverses text)", "ko": "seed 트랜스포머 (글자 뒤집기)"},
    "models.seed-sort": {"en": "seed Transformer (sorts characters)", "ko": "seed 트랜스포머 (글자 정렬)"},
    "models.minilm": {"en": "MiniLM (BERT encoder)", "ko": "MiniLM (BERT 인코더)"},
    "models.smollm2": {"en": "SmolLM2 (Llama decoder)", "ko": "SmolLM2 (Llama 디코더)"},
    "no_weights_here": {"en": "The projection weights are not available for this run.",
                        "ko": "이 실행에는 투영 가중치가 없습니다."},
    "kv_head_note": {"en": "Head {h} reads K/V head {g} (shared with heads {others}).",
                     "ko": "헤드 {h}는 K/V 헤드 {g}를 읽습니다 (헤드 {others}와 공유)."},
    "pe_learned_note": {"en": "Above: the model's learned position embeddings (trained parameters, no formula) "
                              "for this sentence's {n} positions. Below: the paper's sinusoidal encoding, "
                              "for comparison.",
                        "ko": "위: 모델이 학습한 위치 임베딩 (공식이 아닌 학습된 매개변수), 이 문장의 위치 {n}개. "
                              "아래: 비교를 위한 논문의 사인파 인코딩."},
    "pe_rotary_note": {"en": "This model adds no positional encoding: it rotates q and k (base {n}, "
                             "d_head = {d}). Below: the paper's sinusoidal encoding, for comparison.",
                       "ko": "이 모델은 위치 인코딩을 더하지 않고 q와 k를 회전시킵니다 (밑 {n}, d_head = {d}). "
                             "아래: 비교를 위한 논문의 사인파 인코딩."},
    "next_position": {"en": "Predict after position", "ko": "이 위치 다음을 예측"},
    "not_for_model": {"en": "This view is for models with {what}.", "ko": "이 보기는 {what} 모델용입니다."},
}

FIG: dict[str, dict[str, str]] = {
    "en": {
        "query": "query", "key": "key", "dim": "dimension", "token": "token", "value": "value",
        "score": "score", "weight": "weight", "masked": "masked", "row_sum": "Σ row",
        "allowed": "allowed", "padding": "blocked: padding", "causal": "blocked: causal",
        "both": "blocked: padding + causal", "mask_padding": "padding mask",
        "mask_causal": "causal (subsequent) mask", "mask_combined": "combined (what the model used)",
        "d_model": "d_model", "d_head": "d_head", "position": "position", "similarity": "PE·PE",
        "embedding": "embedding", "encoding": "positional encoding", "sum": "sum (enters block 0)",
        "distance": "distance m − n", "sentence": "sentence", "pad": "padding",
        "this_head": "this head: z · W_O[head]", "all_heads": "all heads + bias (hook_out)",
        "weights": "weights", "z": "z = weights · V",
        "cosine": "cosine", "pair": "pair i", "theta": "θ_i (radians per position)",
        "wavelength": "wavelength 2π/θ_i (positions)", "query_head": "query head", "kv_head": "K/V head",
        "probability": "probability", "rank": "rank",
    },
    "ko": {
        "query": "쿼리", "key": "키", "dim": "차원", "token": "토큰", "value": "값",
        "score": "점수", "weight": "가중치", "masked": "가려짐", "row_sum": "행 합",
        "allowed": "허용", "padding": "차단: 패딩", "causal": "차단: 미래(인과)",
        "both": "차단: 패딩 + 인과", "mask_padding": "패딩 마스크",
        "mask_causal": "인과(후속) 마스크", "mask_combined": "합친 마스크 (모델이 쓴 것)",
        "d_model": "d_model", "d_head": "d_head", "position": "위치", "similarity": "PE·PE",
        "embedding": "임베딩", "encoding": "위치 인코딩", "sum": "합 (0번 블록 입력)",
        "distance": "거리 m − n", "sentence": "문장", "pad": "패딩",
        "this_head": "이 헤드: z · W_O[헤드]", "all_heads": "모든 헤드 + 편향 (hook_out)",
        "weights": "가중치", "z": "z = 가중치 · V",
        "cosine": "코사인", "pair": "쌍 i", "theta": "θ_i (위치당 회전 각, 라디안)",
        "wavelength": "파장 2π/θ_i (위치)", "query_head": "쿼리 헤드", "kv_head": "K/V 헤드",
        "probability": "확률", "rank": "순위",
    },
}

# stage id -> title, a one-or-two-sentence explanation, and the formula (LaTeX), per language
STAGE_TEXT: dict[str, dict] = {
    "tokens": {
        "title": {"en": "Tokens and the padded batch", "ko": "토큰과 패딩된 배치"},
        "explain": {
            "en": "The text is cut into tokens, each with an id. Sentences of different lengths are "
                  "padded to the same length so they can run as one batch; the pads (grey) must "
                  "later be hidden from attention.",
            "ko": "글을 토큰으로 자르고 각 토큰에 번호(id)를 붙입니다. 길이가 다른 문장은 같은 길이로 "
                  "패딩해 한 배치로 처리하며, 패딩(회색)은 나중에 어텐션에서 가려야 합니다."},
        "formula": r"\text{text} \rightarrow (t_0, t_1, \dots, t_{T-1}),\quad t_i \in \{0,\dots,|V|-1\}",
    },
    "embedding": {
        "title": {"en": "Embedding + positional encoding", "ko": "임베딩 + 위치 인코딩"},
        "explain": {
            "en": "Each token id becomes a vector (its embedding, scaled by √d_model). Attention "
                  "itself ignores order, so a positional encoding is added to say where each token is.",
            "ko": "각 토큰 id는 벡터(임베딩, √d_model을 곱함)가 됩니다. 어텐션 자체는 순서를 모르기 "
                  "때문에, 각 토큰의 위치를 알려 주는 위치 인코딩을 더합니다."},
        "formula": r"x_i = E[t_i]\,\sqrt{d_{model}} + PE_i",
    },
    "pe_heatmap": {
        "title": {"en": "Positional encoding (position × dimension)", "ko": "위치 인코딩 (위치 × 차원)"},
        "explain": {
            "en": "Every position gets a fixed pattern of sines and cosines. Low dimensions change "
                  "quickly from one position to the next, high dimensions slowly.",
            "ko": "위치마다 사인과 코사인으로 된 고정된 패턴이 주어집니다. 앞쪽 차원은 위치에 따라 빠르게, "
                  "뒤쪽 차원은 천천히 변합니다."},
        "formula": r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{n^{2i/d_{model}}}\right),\quad "
                   r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{n^{2i/d_{model}}}\right)",
    },
    "pe_curves": {
        "title": {"en": "Dimensions as waves", "ko": "차원별 파동"},
        "explain": {
            "en": "Each pair of dimensions is one wave: sin (solid) and cos (dashed) of the same "
                  "frequency. The dots are the values this sentence's positions receive.",
            "ko": "두 차원이 한 쌍으로 하나의 파동을 이룹니다: 같은 주파수의 sin(실선)과 cos(점선). "
                  "점은 이 문장의 각 위치가 받는 값입니다."},
        "formula": r"\omega_i = \frac{1}{n^{2i/d_{model}}},\qquad "
                   r"PE_{pos} = \big(\sin(\omega_0 pos), \cos(\omega_0 pos), \sin(\omega_1 pos), \dots\big)",
    },
    "pe_similarity": {
        "title": {"en": "Position-to-position similarity (PE·PE)", "ko": "위치 사이 유사도 (PE·PE)"},
        "explain": {
            "en": "The dot product of two encodings is largest for the same position and falls off "
                  "with distance — and it depends only on the distance, not on where you start.",
            "ko": "두 인코딩의 내적은 같은 위치에서 가장 크고 거리가 멀어질수록 작아집니다. 그리고 "
                  "시작 위치와 상관없이 거리에만 달려 있습니다."},
        "formula": r"PE_m \cdot PE_n = \sum_i \cos\big(\omega_i (m-n)\big)",
    },
    "pe_compare": {
        "title": {"en": "Base n = 10000 vs n = 100", "ko": "밑 n = 10000 과 n = 100 비교"},
        "explain": {
            "en": "A smaller base makes every wave faster: the encodings repeat sooner and the "
                  "similarity falls off and oscillates over short distances.",
            "ko": "밑이 작으면 모든 파동이 빨라집니다: 인코딩이 더 빨리 되풀이되고, 유사도도 짧은 "
                  "거리에서 떨어지고 출렁입니다."},
        "formula": r"\omega_i = n^{-2i/d_{model}},\qquad n \in \{10000,\ 100\}",
    },
    "pe_learned_sim": {
        "title": {"en": "Learned positions: similarity (cosine)", "ko": "학습된 위치: 유사도 (코사인)"},
        "explain": {
            "en": "BERT learns one vector per position instead of using a formula. The cosine between "
                  "two positions' vectors shows what training made of 'nearby': similar neighbours "
                  "form a bright band along the diagonal.",
            "ko": "BERT는 공식 대신 위치마다 벡터 하나를 학습합니다. 두 위치 벡터 사이의 코사인은 학습이 "
                  "'가까움'을 어떻게 만들었는지 보여 줍니다: 비슷한 이웃은 대각선을 따라 밝은 띠를 이룹니다."},
        "formula": r"\cos(P_m, P_n) = \frac{P_m \cdot P_n}{\lVert P_m\rVert\,\lVert P_n\rVert}",
    },
    "rope_freqs": {
        "title": {"en": "Rotary: rotation frequencies θ_i", "ko": "회전 위치 인코딩: 회전 주파수 θ_i"},
        "explain": {
            "en": "Rotary (RoPE) splits q and k into pairs of dimensions and turns pair i by the angle "
                  "θ_i·pos. The first pairs turn fast (short range), the last ones slowly (long range).",
            "ko": "회전 위치 인코딩(RoPE)은 q와 k를 차원 쌍으로 나누고 쌍 i를 θ_i·pos 각도만큼 돌립니다. "
                  "앞쪽 쌍은 빠르게(짧은 거리), 뒤쪽 쌍은 천천히(먼 거리) 돕니다."},
        "formula": r"\theta_i = \text{base}^{-2i/d_{head}},\quad "
                   r"(q_i, q_{i+d/2}) \mapsto R(\theta_i\, pos)\,(q_i, q_{i+d/2})",
    },
    "rope_distance": {
        "title": {"en": "Rotary: score vs relative distance", "ko": "회전 위치 인코딩: 상대 거리에 따른 점수"},
        "explain": {
            "en": "Two fixed vectors (the same content at both ends), rotated for positions m and n: "
                  "their score depends only on the distance m − n, and tends to fall as it grows.",
            "ko": "고정된 두 벡터(양 끝이 같은 내용)를 위치 m과 n에 맞게 회전시키면, 점수는 거리 m − n에만 "
                  "달려 있고 거리가 멀어질수록 대체로 작아집니다."},
        "formula": r"(R_m q)\cdot(R_n k) = q^\top R_{n-m}\, k",
    },
    "gqa": {
        "title": {"en": "Grouped-query attention: shared K/V heads", "ko": "그룹 쿼리 어텐션: 공유하는 K/V 헤드"},
        "explain": {
            "en": "Several query heads share one key/value head, so the model stores fewer keys and "
                  "values. Each column is a query head; its cell shows which K/V head it reads.",
            "ko": "여러 쿼리 헤드가 키/값 헤드 하나를 함께 써서 저장할 키와 값이 줄어듭니다. 각 열은 쿼리 "
                  "헤드이고, 칸은 그 헤드가 읽는 K/V 헤드를 보여 줍니다."},
        "formula": r"g(h) = \left\lfloor \frac{h}{n_{heads} / n_{kv}} \right\rfloor,\qquad "
                   r"K^{(h)} = X W_K^{(g(h))},\ V^{(h)} = X W_V^{(g(h))}",
    },
    "weights": {
        "title": {"en": "This head's W_Q, W_K, W_V", "ko": "이 헤드의 W_Q, W_K, W_V"},
        "explain": {
            "en": "Each head owns d_head columns of the projection matrices: they turn a d_model-wide "
                  "token vector into this head's query, key and value.",
            "ko": "각 헤드는 투영 행렬의 d_head개 열을 가집니다. 이 열들이 d_model 차원의 토큰 벡터를 "
                  "이 헤드의 쿼리·키·값으로 바꿉니다."},
        "formula": r"W_Q^{(h)},\ W_K^{(h)},\ W_V^{(h)} \in \mathbb{R}^{d_{model} \times d_{head}}",
    },
    "qkv": {
        "title": {"en": "Queries, keys and values", "ko": "쿼리, 키, 값"},
        "explain": {
            "en": "Every token asks a question (its query), offers a label (its key) and carries "
                  "content (its value). In cross-attention the keys and values come from the encoder.",
            "ko": "각 토큰은 질문(쿼리)을 던지고, 이름표(키)를 내밀고, 내용(값)을 담습니다. 크로스 "
                  "어텐션에서는 키와 값이 인코더에서 옵니다."},
        "formula": r"Q = X W_Q^{(h)},\quad K = X W_K^{(h)},\quad V = X W_V^{(h)}",
    },
    "qk": {
        "title": {"en": "Scores Q·Kᵀ", "ko": "점수 Q·Kᵀ"},
        "explain": {
            "en": "Each query is compared with every key by a dot product: large when they point "
                  "the same way. Row i holds query i's scores for all keys.",
            "ko": "각 쿼리를 모든 키와 내적으로 비교합니다. 같은 방향을 가리킬수록 큽니다. i번째 행은 "
                  "쿼리 i가 모든 키에 준 점수입니다."},
        "formula": r"S_{ij} = q_i \cdot k_j = \sum_{d} q_{i,d}\, k_{j,d}",
    },
    "scaled": {
        "title": {"en": "Scaled scores Q·Kᵀ ÷ √d_k", "ko": "크기를 줄인 점수 Q·Kᵀ ÷ √d_k"},
        "explain": {
            "en": "Dividing by √d_k keeps the scores in a range where softmax is not saturated, so "
                  "gradients still flow. Same colour range as Q·Kᵀ: the scaled scores look paler.",
            "ko": "√d_k로 나누면 점수가 softmax가 포화되지 않는 범위에 머물러 기울기가 잘 흐릅니다. "
                  "Q·Kᵀ와 같은 색 범위라서 나눈 점수가 더 옅게 보입니다."},
        "formula": r"\tilde S_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}}",
    },
    "mask": {
        "title": {"en": "Masks: padding, causal, combined", "ko": "마스크: 패딩, 인과, 합친 것"},
        "explain": {
            "en": "The padding mask hides pad keys; the causal (subsequent) mask stops a decoder "
                  "position from seeing later ones. The model uses both together.",
            "ko": "패딩 마스크는 패딩 키를 가리고, 인과(후속) 마스크는 디코더가 뒤의 위치를 보지 못하게 "
                  "합니다. 모델은 둘을 함께 씁니다."},
        "formula": r"M_{ij} = \underbrace{[\,j < T_{real}\,]}_{\text{padding}} \wedge "
                   r"\underbrace{[\,j \le i\,]}_{\text{causal}}",
    },
    "masked": {
        "title": {"en": "Masked scores", "ko": "마스크를 적용한 점수"},
        "explain": {
            "en": "Where the mask forbids attention the score becomes −∞ (grey cells), so its softmax "
                  "weight is exactly zero.",
            "ko": "마스크가 막은 칸의 점수는 −∞(회색 칸)가 되어, softmax 가중치가 정확히 0이 됩니다."},
        "formula": r"\hat S_{ij} = \begin{cases} \tilde S_{ij} & M_{ij} \\ -\infty & \text{otherwise} \end{cases}",
    },
    "softmax": {
        "title": {"en": "Softmax weights", "ko": "softmax 가중치"},
        "explain": {
            "en": "Softmax turns each row of scores into weights that are positive and sum to 1 "
                  "(see the Σ column): how much query i takes from each key.",
            "ko": "softmax는 점수의 각 행을 양수이고 합이 1인 가중치로 바꿉니다 (Σ 열 참고). 쿼리 i가 "
                  "각 키에서 얼마나 가져오는지를 뜻합니다."},
        "formula": r"A_{ij} = \frac{e^{\hat S_{ij}}}{\sum_{j'} e^{\hat S_{ij'}}},\qquad \sum_j A_{ij} = 1",
    },
    "z": {
        "title": {"en": "Output z = weights · V", "ko": "출력 z = 가중치 · V"},
        "explain": {
            "en": "Each query's output is the weighted average of the values, using its row of "
                  "weights.",
            "ko": "각 쿼리의 출력은 자기 가중치 행으로 값(V)을 가중 평균한 것입니다."},
        "formula": r"z_i = \sum_j A_{ij}\, v_j \qquad (Z = A V)",
    },
    "out": {
        "title": {"en": "The head's contribution after W_O", "ko": "W_O를 거친 이 헤드의 기여"},
        "explain": {
            "en": "The heads' outputs are concatenated and projected by W_O; this head's share is "
                  "its z times its own d_head rows of W_O. Adding all heads (and the bias) gives the "
                  "block's attention output.",
            "ko": "헤드들의 출력을 이어 붙여 W_O로 투영합니다. 이 헤드의 몫은 z에 W_O 중 자기 d_head개 "
                  "행을 곱한 것이고, 모든 헤드(와 편향)를 더하면 블록의 어텐션 출력이 됩니다."},
        "formula": r"\mathrm{MultiHead}(X) = \mathrm{Concat}(z^{(1)},\dots,z^{(H)})\,W_O = "
                   r"\sum_h z^{(h)} W_O^{(h)} + b_O",
    },
    "next_token": {
        "title": {"en": "Top next-token predictions", "ko": "다음 토큰 예측 (상위)"},
        "explain": {
            "en": "A decoder predicts the next token at every position, from what it has seen so far. "
                  "These are the ten most likely tokens after the chosen position, with their softmax "
                  "probabilities.",
            "ko": "디코더는 위치마다 지금까지 본 것으로 다음 토큰을 예측합니다. 고른 위치 다음에 올 "
                  "가능성이 가장 높은 토큰 10개와 softmax 확률입니다."},
        "formula": r"p(t_{i+1} \mid t_{\le i}) = \mathrm{softmax}\big(h_i W_{out}^\top\big)",
    },
    "cell": {
        "title": {"en": "One cell, derived", "ko": "한 칸을 직접 계산하기"},
        "explain": {
            "en": "Follow one query i and one key j through every step: multiply q and k dimension "
                  "by dimension, add up, divide by √d_k, apply the mask, then softmax over the row.",
            "ko": "쿼리 i와 키 j 하나를 모든 단계에 따라가 봅니다: q와 k를 차원별로 곱해 더하고, √d_k로 "
                  "나누고, 마스크를 적용한 뒤, 행 전체에 softmax를 합니다."},
        "formula": r"A_{ij} = \mathrm{softmax}_j\!\left(\frac{\sum_d q_{i,d}\,k_{j,d}}{\sqrt{d_k}} "
                   r"+ \log M_{ij}\right)",
    },
    "overview": {
        "title": {"en": "All layers × heads", "ko": "모든 층 × 헤드"},
        "explain": {
            "en": "Every head's weights at once. Heads differ: some look at themselves, some at "
                  "neighbours, some spread out. Entropy H and mean distance d summarise each.",
            "ko": "모든 헤드의 가중치를 한꺼번에 봅니다. 헤드마다 다릅니다: 자기 자신을 보거나, 이웃을 "
                  "보거나, 넓게 퍼집니다. 엔트로피 H와 평균 거리 d가 각 헤드를 요약합니다."},
        "formula": r"H_h = -\frac{1}{T}\sum_i \sum_j A_{ij}\log A_{ij},\qquad "
                   r"d_h = \frac{1}{T}\sum_i \sum_j A_{ij}\,|i-j|",
    },
}


def lang_or_default(lang: str | None) -> str:
    return lang if lang in LANGS else "en"


def t(key: str, lang: str = "en", **kw) -> str:
    """A UI string in ``lang`` (English when missing), with ``{placeholders}`` filled in."""
    entry = UI.get(key)
    if entry is None:
        return key
    text = entry.get(lang_or_default(lang)) or entry["en"]
    return text.format(**kw) if kw else text


def stage_text(stage_id: str, lang: str = "en") -> dict:
    """{"title", "explain", "formula"} for one stage in ``lang``."""
    s = STAGE_TEXT[stage_id]
    lang = lang_or_default(lang)
    return {"title": s["title"][lang], "explain": s["explain"][lang], "formula": s["formula"]}


def fig_labels(lang: str = "en") -> dict:
    return dict(FIG[lang_or_default(lang)])
