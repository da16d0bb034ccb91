/* CPU kernels of one beam-search decoding step (model/cpu_kernels/__init__.py loads them).
 *
 * Why C: at a decoding step every attention call has one query per row, and PyTorch's fused
 * attention spends most of its time per (row, head) unit rather than on arithmetic; the
 * log-softmax over the vocabulary writes a (rows, V) tensor that beam search then reads only
 * to find 2K candidates per sentence. Here each is one pass (benchmarks/decode_speed.py --profile).
 *
 * Compiled with -fno-finite-math-only kept: -inf marks masked keys, dead beams and banned tokens.
 * expf is declared SIMD so that the loops over keys and over the vocabulary vectorise through
 * glibc's libmvec. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef PHRASAL_NO_LIBMVEC
__attribute__((__simd__("notinbranch"))) float expf(float);
#endif

#define MAX_KEYS 4096
#define MAX_HEAD_DIM 512

/* softmax over s[0..n) in place, -inf entries get 0; all zeros when every entry is -inf. */
static inline void softmax_in_place(float *s, int64_t n) {
  float mx = -INFINITY;
  for (int64_t t = 0; t < n; ++t) mx = s[t] > mx ? s[t] : mx;
  if (mx == -INFINITY) {
    for (int64_t t = 0; t < n; ++t) s[t] = 0.f;
    return;
  }
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t t = 0; t < n; ++t) {
    float e = expf(s[t] - mx);
    s[t] = e;
    sum += e;
  }
  const float inv = 1.f / sum;
#pragma omp simd
  for (int64_t t = 0; t < n; ++t) s[t] *= inv;
}

static inline float dot(const float *a, const float *b, int64_t dh) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int64_t d = 0; d < dh; ++d) acc += a[d] * b[d];
  return acc;
}

/* Self-attention of one step over a paged cache: key/value s of row n lives in column s, at row
 * table[n * table_stride + s] of that column (columns are the per-step projections, kept as
 * written; a beam reorder permutes the table, not the cache). Column s starts at k_cols[s] /
 * v_cols[s], its rows col_stride floats apart. q (N, H·dh) rows q_stride apart; out likewise. */
__attribute__((always_inline)) static inline void self_attention_body(
    const float *q, int64_t q_stride, const int64_t *k_cols, const int64_t *v_cols, int64_t col_stride,
    const int32_t *table, int64_t table_stride, int64_t n_rows, int64_t n_heads, int64_t steps, int64_t dh,
    float scale, float *out, int64_t out_stride) {
  float s[MAX_KEYS];
  float acc[MAX_HEAD_DIM];
  float wide[MAX_KEYS]; /* every head's output of one row */
  const float *k_rows[MAX_KEYS], *v_rows[MAX_KEYS];
  for (int64_t n = 0; n < n_rows; ++n) {
    const int32_t *rows = table + n * table_stride;
    /* Row n's keys and values, found once for all heads. */
    for (int64_t t = 0; t < steps; ++t) {
      k_rows[t] = (const float *)(intptr_t)k_cols[t] + rows[t] * col_stride;
      v_rows[t] = (const float *)(intptr_t)v_cols[t] + rows[t] * col_stride;
    }
    const float *qn = q + n * q_stride;
    if (n_heads * steps <= MAX_KEYS && n_heads * dh <= MAX_KEYS) {
      /* Steps outer, heads inner: each cached row is read once for all heads, and the heads'
       * dot products are independent work for the core. Per head the sums are the same as
       * below, in the same order, so the results are bit for bit those of the per-head loop. */
      for (int64_t t = 0; t < steps; ++t)
        for (int64_t h = 0; h < n_heads; ++h) s[h * steps + t] = dot(qn + h * dh, k_rows[t] + h * dh, dh) * scale;
      for (int64_t h = 0; h < n_heads; ++h) softmax_in_place(s + h * steps, steps);
      for (int64_t e = 0; e < n_heads * dh; ++e) wide[e] = 0.f;
      for (int64_t t = 0; t < steps; ++t)
        for (int64_t h = 0; h < n_heads; ++h) {
          const float *vv = v_rows[t] + h * dh;
          const float p = s[h * steps + t];
          float *a = wide + h * dh;
#pragma omp simd
          for (int64_t d = 0; d < dh; ++d) a[d] += p * vv[d];
        }
      memcpy(out + n * out_stride, wide, n_heads * dh * sizeof(float));
      continue;
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      const float *qq = qn + h * dh;
      for (int64_t t = 0; t < steps; ++t) s[t] = dot(qq, k_rows[t] + h * dh, dh) * scale;
      softmax_in_place(s, steps);
      for (int64_t d = 0; d < dh; ++d) acc[d] = 0.f;
      for (int64_t t = 0; t < steps; ++t) {
        const float *vv = v_rows[t] + h * dh;
        const float p = s[t];
#pragma omp simd
        for (int64_t d = 0; d < dh; ++d) acc[d] += p * vv[d];
      }
      memcpy(out + n * out_stride + h * dh, acc, dh * sizeof(float));
    }
  }
}

int phrasal_self_attention(const float *q, int64_t q_stride, const int64_t *k_cols, const int64_t *v_cols,
                           int64_t col_stride, const int32_t *table, int64_t table_stride, int64_t n_rows,
                           int64_t n_heads, int64_t steps, int64_t dh, float scale, float *out, int64_t out_stride) {
  if (steps > MAX_KEYS || dh > MAX_HEAD_DIM) return 1;
  /* The common head sizes as constants, so the dot products unroll. */
  if (dh == 32)
    self_attention_body(q, q_stride, k_cols, v_cols, col_stride, table, table_stride, n_rows, n_heads, steps, 32,
                        scale, out, out_stride);
  else if (dh == 64)
    self_attention_body(q, q_stride, k_cols, v_cols, col_stride, table, table_stride, n_rows, n_heads, steps, 64,
                        scale, out, out_stride);
  else
    self_attention_body(q, q_stride, k_cols, v_cols, col_stride, table, table_stride, n_rows, n_heads, steps, dh,
                        scale, out, out_stride);
  return 0;
}

/* Cross-attention of one step: row n reads sentence sentence[n] of the projected memory, whose
 * position j is at k + sentence * sent_stride + j * pos_stride (v likewise), attending where
 * keep[sentence * keep_stride + j] is nonzero. attention (N, S), the probabilities averaged over
 * the heads (what an alignment reads), is written when not NULL; a row with no key to attend gets
 * zero probabilities and a zero output. */
__attribute__((always_inline)) static inline void cross_attention_body(
    const float *q, int64_t q_stride, const float *k, const float *v, int64_t pos_stride, int64_t sent_stride,
    const int32_t *sentence, const uint8_t *keep, int64_t keep_stride, int64_t n_rows, int64_t n_heads,
    int64_t length, int64_t dh, float scale, float *out, int64_t out_stride, float *attention) {
  float s[MAX_KEYS];
  float acc[MAX_HEAD_DIM];
  const float per_head = 1.f / (float)n_heads;
  for (int64_t n = 0; n < n_rows; ++n) {
    const int64_t b = sentence[n];
    const uint8_t *m = keep + b * keep_stride;
    float *average = attention ? attention + n * length : 0;
    if (average)
      for (int64_t j = 0; j < length; ++j) average[j] = 0.f;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float *qq = q + n * q_stride + h * dh;
      const float *kb = k + b * sent_stride + h * dh;
      const float *vb = v + b * sent_stride + h * dh;
      for (int64_t j = 0; j < length; ++j) s[j] = m[j] ? dot(qq, kb + j * pos_stride, dh) * scale : -INFINITY;
      softmax_in_place(s, length);
      for (int64_t d = 0; d < dh; ++d) acc[d] = 0.f;
      for (int64_t j = 0; j < length; ++j) {
        const float p = s[j];
        if (p == 0.f) continue;
        const float *vv = vb + j * pos_stride;
#pragma omp simd
        for (int64_t d = 0; d < dh; ++d) acc[d] += p * vv[d];
      }
      memcpy(out + n * out_stride + h * dh, acc, dh * sizeof(float));
      if (average)
        for (int64_t j = 0; j < length; ++j) average[j] += s[j] * per_head;
    }
  }
}

int phrasal_cross_attention(const float *q, int64_t q_stride, const float *k, const float *v, int64_t pos_stride,
                            int64_t sent_stride, const int32_t *sentence, const uint8_t *keep, int64_t keep_stride,
                            int64_t n_rows, int64_t n_heads, int64_t length, int64_t dh, float scale, float *out,
                            int64_t out_stride, float *attention) {
  if (length > MAX_KEYS || dh > MAX_HEAD_DIM) return 1;
  if (dh == 32)
    cross_attention_body(q, q_stride, k, v, pos_stride, sent_stride, sentence, keep, keep_stride, n_rows, n_heads,
                         length, 32, scale, out, out_stride, attention);
  else if (dh == 64)
    cross_attention_body(q, q_stride, k, v, pos_stride, sent_stride, sentence, keep, keep_stride, n_rows, n_heads,
                         length, 64, scale, out, out_stride, attention);
  else
    cross_attention_body(q, q_stride, k, v, pos_stride, sent_stride, sentence, keep, keep_stride, n_rows, n_heads,
                         length, dh, scale, out, out_stride, attention);
  return 0;
}

/* Insert (value, index) into best[0..*filled) sorted best first, keeping at most count; a value
 * equal to one already there goes after it (earlier candidates first). */
static inline void offer(float value, int64_t index, float *best, int64_t *best_index, int64_t *filled,
                         int64_t count) {
  int64_t at = *filled < count ? *filled : count - 1;
  if (*filled == count && !(value > best[count - 1])) return;
  while (at > 0 && value > best[at - 1]) {
    best[at] = best[at - 1];
    best_index[at] = best_index[at - 1];
    --at;
  }
  best[at] = value;
  best_index[at] = index;
  if (*filled < count) ++*filled;
}

#define BLOCK 64
#define MAX_BLOCKS 8192

/* exp(x) for finite x <= 0: Cody-Waite reduction by ln 2 (two fused multiply-adds, which the
 * compiler may not re-associate) and Cephes' degree-6 polynomial, 2^n through the exponent bits;
 * within 1e-7 relative of exp down to -87, below which it returns exp(-87) (nothing a sum of
 * probabilities can see). Written out rather than called so that the loop over the vocabulary
 * vectorises without libmvec's special-case handling: about 0.6x its time here. */
static inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = __builtin_fmaf(n, -0.693359375f, x);
  r = __builtin_fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* Beam search's candidates straight from the logits: per sentence i, the `count` best
 * scores[i, k] + log_softmax(logits[i·K + k])[v] over its K beams and V tokens, best first, with
 * flat indices k·V + v. The log-softmax is (x - max) - log(Σ exp(x - max)), as PyTorch computes
 * it; tokens with banned[v] nonzero get -inf after it (PAD and BOS), and a sentence with
 * eos_only[i] nonzero may only end. Beams at -inf are skipped; a sentence with fewer than
 * `count` finite candidates is padded with (-inf, 0). Two passes over a row: the maxima of its
 * blocks of BLOCK tokens (the row's maximum among them), and the sum of exponentials; then only
 * the blocks whose maximum could still place a candidate are read again. */
int phrasal_beam_candidates(const float *logits, int64_t row_stride, const float *scores, int64_t n_sentences,
                            int64_t beams, int64_t vocab, const uint8_t *banned, const uint8_t *eos_only,
                            int64_t eos_id, int64_t count, float *out_values, int64_t *out_index) {
  if (count < 1 || count > beams * vocab) return 1;
  const int64_t n_blocks = (vocab + BLOCK - 1) / BLOCK;
  if (n_blocks > MAX_BLOCKS) return 1;
  float block_max[MAX_BLOCKS];
  for (int64_t i = 0; i < n_sentences; ++i) {
    float *best = out_values + i * count;
    int64_t *best_index = out_index + i * count;
    int64_t filled = 0;
    for (int64_t k = 0; k < beams; ++k) {
      const float score = scores[i * beams + k];
      if (score == -INFINITY) continue;
      /* Log-probs are at most 0: a beam whose score cannot beat the count-th candidate found so
       * far has nothing to add, and costs no pass. */
      if (filled == count && !(score > best[count - 1])) continue;
      const float *x = logits + (i * beams + k) * row_stride;
      float mx = -INFINITY;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t start = b * BLOCK, stop = start + BLOCK < vocab ? start + BLOCK : vocab;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (int64_t v = start; v < stop; ++v) m = x[v] > m ? x[v] : m;
        block_max[b] = m;
        mx = m > mx ? m : mx;
      }
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t v = 0; v < vocab; ++v) sum += exp_nonpositive(x[v] - mx);
      const float log_sum = logf(sum);
      if (eos_only && eos_only[i]) {
        if (!(banned && banned[eos_id])) offer(score + ((x[eos_id] - mx) - log_sum), k * vocab + eos_id, best,
                                               best_index, &filled, count);
        continue;
      }
      for (int64_t b = 0; b < n_blocks; ++b) {
        /* Float subtraction and addition are monotonic, so the block's best candidate bounds the rest. */
        if (filled == count && !(score + ((block_max[b] - mx) - log_sum) > best[count - 1])) continue;
        const int64_t start = b * BLOCK, stop = start + BLOCK < vocab ? start + BLOCK : vocab;
        for (int64_t v = start; v < stop; ++v) {
          if (banned && banned[v]) continue;
          offer(score + ((x[v] - mx) - log_sum), k * vocab + v, best, best_index, &filled, count);
        }
      }
    }
    for (; filled < count; ++filled) {
      best[filled] = -INFINITY;
      best_index[filled] = 0;
    }
  }
  return 0;
}

/* One step's choice from its candidates: model/decoding/selection.py's `select`, which defines it
 * (tests/model/test_selection.py checks this against it), in one call instead of a dozen tensor
 * operations a step. Per sentence i, values[i] (count, best first) and flat indices k·vocab + v:
 * parent and token of every candidate; finished[r] (r < beams) when candidate r is EOS and not
 * -inf; the next beams are the first `beams` non-EOS candidates in rank order, then, when fewer,
 * the EOS candidates in rank order with score -inf. */
int phrasal_select(const float *values, const int64_t *index, int64_t n_sentences, int64_t count, int64_t vocab,
                   int64_t eos_id, int64_t beams, int64_t *parent, int64_t *token, uint8_t *finished,
                   float *next_scores, int64_t *next_tokens, int64_t *next_parent) {
  if (beams < 1 || count < beams || vocab < 1) return 1;
  for (int64_t i = 0; i < n_sentences; ++i) {
    const float *value = values + i * count;
    const int64_t *flat = index + i * count;
    int64_t *p = parent + i * count, *t = token + i * count;
    for (int64_t r = 0; r < count; ++r) {
      p[r] = flat[r] / vocab;
      t[r] = flat[r] % vocab;
    }
    for (int64_t r = 0; r < beams; ++r) finished[i * beams + r] = t[r] == eos_id && value[r] > -INFINITY;
    int64_t kept = 0;
    for (int pass = 0; pass < 2 && kept < beams; ++pass)  /* non-EOS first, then EOS */
      for (int64_t r = 0; r < count && kept < beams; ++r) {
        const int is_eos = t[r] == eos_id;
        if (is_eos != pass) continue;
        next_scores[i * beams + kept] = is_eos ? -INFINITY : value[r];
        next_tokens[i * beams + kept] = t[r];
        next_parent[i * beams + kept] = p[r];
        ++kept;
      }
  }
  return 0;
}

/* The residual sum and the layer norm after it, in one pass over the rows: sum = x + y (written
 * to `sum`, unless y is NULL: then the norm of x alone), norm = (sum - mean) / sqrt(var + eps) ·
 * weight + bias, with the biased variance, as torch.nn.LayerNorm. A decoding step has one such
 * pair per sub-layer, each too small for PyTorch's per-call cost to be worth paying twice. */
int phrasal_add_layer_norm(const float *x, const float *y, int64_t n_rows, int64_t dim, const float *weight,
                           const float *bias, float eps, float *sum, float *norm) {
  for (int64_t n = 0; n < n_rows; ++n) {
    const float *a = x + n * dim;
    float *s = y ? sum + n * dim : (float *)a;
    if (y) {
      const float *b = y + n * dim;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) s[d] = a[d] + b[d];
    }
    float mean = 0.f;
#pragma omp simd reduction(+ : mean)
    for (int64_t d = 0; d < dim; ++d) mean += s[d];
    mean /= (float)dim;
    float var = 0.f;
#pragma omp simd reduction(+ : var)
    for (int64_t d = 0; d < dim; ++d) var += (s[d] - mean) * (s[d] - mean);
    const float inv = 1.f / sqrtf(var / (float)dim + eps);
    float *out = norm + n * dim;
#pragma omp simd
    for (int64_t d = 0; d < dim; ++d) out[d] = (s[d] - mean) * inv * weight[d] + bias[d];
  }
  return 0;
}

/* The int8 linear layer of the CPU int8 path (model/int8_linear.py, `Int8Linear`): the
 * numbers of its reference in PyTorch operations (`reference` there) bit for bit, every float
 * operation below one IEEE operation there, each rounded on its own (fp-contract off: no FMA):
 * - each row of x (m, k) is quantised with its own scale and zero point, so that a row's output
 *   depends on that row alone (a translation does not depend on the other texts of its batch):
 *   lo = min(0, min of the row), hi = max(0, max of the row), scale = (hi - lo) / 127 (1 where
 *   that is 0 or not finite), inverse = 1 / scale, zero_point = clamp(round(-lo · inverse), 0, 127),
 *   q = clamp(round(x · inverse) + zero_point, 0, 127), rounding to nearest even. Seven bits, so
 *   that AVX2's u8·s8 pair sums in int16 cannot saturate;
 * - acc = q·w in int32 (exact), less zero_point·Σw of the row (the weights are symmetric int8 per
 *   output channel, zero point 0);
 * - out = float(acc) · (scale · w_scale[j]) + bias[j], then the ReLU.
 * w is packed by `pack` (int8_linear.py): blocks of 16 output channels, within a block groups of 4
 * inputs, each group 16 channels x 4 bytes (the layout of VNNI's dot product); k and n are padded
 * with zero weights to multiples of 4 and 16. w_sums[j] = Σ_k w[j][k] and w_scale[j] have n
 * entries; bias n or NULL. `quantized` is scratch of `scratch_bytes(m, k)` (int8_linear.py): the quantised rows
 * (k4 bytes each, k4 = k rounded up to 4), then each row's scale and zero point.
 * tests/model/test_int8_linear.py checks it against the reference on every branch, and
 * int8_linear.agreement_problem once a process before it is used. */
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define INT8_QMAX 127

/* Sixteen channels' int32 dot products with `rows` (1 to 4) rows of quantised inputs (k4 bytes
 * each, `a` the first), from the packed block `w` (k4/4 groups of 64 bytes); acc[r·16 + c]. Rows
 * and, for one row, halves of k run as independent sums so that the dot products overlap. */
static inline void int8_block_dots(const uint8_t *a, int64_t rows, int64_t k4, const int8_t *w, int32_t *acc) {
  const int64_t groups = k4 / 4;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  const uint8_t *a1 = a + k4, *a2 = a + 2 * k4, *a3 = a + 3 * k4;
  int32_t four;
  if (rows == 1) {
    int64_t g = 0;
    for (; g + 1 < groups; g += 2) {
      memcpy(&four, a + 4 * g, 4);
      s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(four), _mm512_loadu_si512((const void *)(w + 64 * g)));
      memcpy(&four, a + 4 * g + 4, 4);
      s1 = _mm512_dpbusd_epi32(s1, _mm512_set1_epi32(four), _mm512_loadu_si512((const void *)(w + 64 * g + 64)));
    }
    if (g < groups) {
      memcpy(&four, a + 4 * g, 4);
      s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(four), _mm512_loadu_si512((const void *)(w + 64 * g)));
    }
    _mm512_storeu_si512((void *)acc, _mm512_add_epi32(s0, s1));
    return;
  }
  for (int64_t g = 0; g < groups; ++g) {
    const __m512i weights = _mm512_loadu_si512((const void *)(w + 64 * g));
    memcpy(&four, a + 4 * g, 4);
    s0 = _mm512_dpbusd_epi32(s0, _mm512_set1_epi32(four), weights);
    memcpy(&four, a1 + 4 * g, 4);
    s1 = _mm512_dpbusd_epi32(s1, _mm512_set1_epi32(four), weights);
    if (rows > 2) {
      memcpy(&four, a2 + 4 * g, 4);
      s2 = _mm512_dpbusd_epi32(s2, _mm512_set1_epi32(four), weights);
    }
    if (rows > 3) {
      memcpy(&four, a3 + 4 * g, 4);
      s3 = _mm512_dpbusd_epi32(s3, _mm512_set1_epi32(four), weights);
    }
  }
  _mm512_storeu_si512((void *)acc, s0);
  _mm512_storeu_si512((void *)(acc + 16), s1);
  if (rows > 2) _mm512_storeu_si512((void *)(acc + 32), s2);
  if (rows > 3) _mm512_storeu_si512((void *)(acc + 48), s3);
#elif defined(__AVX2__)
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t *x_row = a + r * k4;
    __m256i low = _mm256_setzero_si256(), high = _mm256_setzero_si256();
    for (int64_t g = 0; g < groups; ++g) {
      int32_t four;
      memcpy(&four, x_row + 4 * g, 4);
      const __m256i x = _mm256_set1_epi32(four);
      /* u8·s8 pairs summed to int16 (exact: inputs below 128), then to int32 */
      low = _mm256_add_epi32(low, _mm256_madd_epi16(_mm256_maddubs_epi16(x, _mm256_loadu_si256((const __m256i *)(w + 64 * g))), ones));
      high = _mm256_add_epi32(high, _mm256_madd_epi16(_mm256_maddubs_epi16(x, _mm256_loadu_si256((const __m256i *)(w + 64 * g + 32))), ones));
    }
    _mm256_storeu_si256((__m256i *)(acc + 16 * r), low);
    _mm256_storeu_si256((__m256i *)(acc + 16 * r + 8), high);
  }
#else
  for (int64_t r = 0; r < rows; ++r) {
    int32_t *sums = acc + 16 * r;
    for (int c = 0; c < 16; ++c) sums[c] = 0;
    for (int64_t g = 0; g < groups; ++g)
      for (int c = 0; c < 16; ++c)
        for (int b = 0; b < 4; ++b) sums[c] += (int32_t)a[r * k4 + 4 * g + b] * (int32_t)w[64 * g + 4 * c + b];
  }
#endif
}

__attribute__((optimize("fp-contract=off", "no-associative-math")))
static void int8_quantize_row(const float *x, int64_t k, int64_t k4, uint8_t *q, float *scale_out, int32_t *zero_point_out) {
  float lo = 0.f, hi = 0.f;
  int64_t d = 0;
#if defined(__AVX512F__)
  /* min and max are exact in any order */
  __m512 low = _mm512_setzero_ps(), high = low;
  for (; d + 16 <= k; d += 16) {
    const __m512 v = _mm512_loadu_ps(x + d);
    low = _mm512_min_ps(low, v);
    high = _mm512_max_ps(high, v);
  }
  lo = _mm512_reduce_min_ps(low);
  hi = _mm512_reduce_max_ps(high);
#endif
  for (; d < k; ++d) {
    lo = x[d] < lo ? x[d] : lo;
    hi = x[d] > hi ? x[d] : hi;
  }
  float scale = (hi - lo) / (float)INT8_QMAX;
  if (!(scale > 0.f) || isinf(scale)) scale = 1.f;
  const float inverse = 1.f / scale;
  const float from_lo = nearbyintf(-lo * inverse);
  const int32_t zero_point = from_lo < 0.f ? 0 : (from_lo > (float)INT8_QMAX ? INT8_QMAX : (int32_t)from_lo);
  d = 0;
#if defined(__AVX512F__)
  /* the loop below sixteen at a time: vcvtps2dq rounds to nearest even as nearbyintf (the
   * default rounding mode), then the same clamps */
  const __m512 inverse_v = _mm512_set1_ps(inverse);
  const __m512 top = _mm512_set1_ps(2147483520.f), bottom = _mm512_set1_ps(-2147483520.f);
  const __m512i zero_v = _mm512_set1_epi32(zero_point), qmax = _mm512_set1_epi32(INT8_QMAX);
  for (; d + 16 <= k; d += 16) {
    __m512 t = _mm512_mul_ps(_mm512_loadu_ps(x + d), inverse_v);
    t = _mm512_max_ps(_mm512_min_ps(t, top), bottom);
    __m512i r = _mm512_add_epi32(_mm512_cvtps_epi32(t), zero_v);
    r = _mm512_min_epi32(_mm512_max_epi32(r, _mm512_setzero_si512()), qmax);
    _mm_storeu_si128((__m128i *)(q + d), _mm512_cvtepi32_epi8(r));
  }
#endif
  for (; d < k; ++d) {
    float t = x[d] * inverse;
    /* clipped before converting (no overflow); 0 or 127 after the clamp either way */
    t = t < 2147483520.f ? t : 2147483520.f;
    t = t > -2147483520.f ? t : -2147483520.f;
    const int32_t r = (int32_t)nearbyintf(t) + zero_point;
    q[d] = (uint8_t)(r < 0 ? 0 : (r > INT8_QMAX ? INT8_QMAX : r));
  }
  for (d = k; d < k4; ++d) q[d] = 0;
  *scale_out = scale;
  *zero_point_out = zero_point;
}

__attribute__((optimize("fp-contract=off", "no-associative-math")))
static void int8_linear(const float *x, int64_t m, int64_t k, const int8_t *w, const int32_t *w_sums,
                        const float *w_scale, const float *bias, int64_t n, int64_t relu, float *out,
                        uint8_t *quantized) {
  if (m <= 0) return;
  const int64_t k4 = (k + 3) / 4 * 4;
  float *x_scale = (float *)(quantized + m * k4);
  int32_t *zero_point = (int32_t *)(x_scale + m);
  for (int64_t i = 0; i < m; ++i) int8_quantize_row(x + i * k, k, k4, quantized + i * k4, x_scale + i, zero_point + i);
  int32_t acc[64];
  for (int64_t block = 0; block < (n + 15) / 16; ++block) {
    const int8_t *packed = w + block * 16 * k4;
    const int64_t first = block * 16, width = n - first < 16 ? n - first : 16;
    for (int64_t i = 0; i < m; i += 4) {
      const int64_t rows = m - i < 4 ? m - i : 4;
      int8_block_dots(quantized + i * k4, rows, k4, packed, acc);
      for (int64_t r = 0; r < rows; ++r) {
        float *row = out + (i + r) * n + first;
        const int32_t *sums = acc + 16 * r;
        const float scale = x_scale[i + r];
        const int32_t zero = zero_point[i + r];
#if defined(__AVX512F__)
        /* the scalar loop below, sixteen lanes at a time (the same roundings) */
        const __mmask16 lanes = (__mmask16)((1u << width) - 1u);
        const __m512i offset = _mm512_mullo_epi32(_mm512_set1_epi32(zero), _mm512_maskz_loadu_epi32(lanes, w_sums + first));
        const __m512 raw = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512((const void *)sums), offset));
        const __m512 multiplier = _mm512_mul_ps(_mm512_set1_ps(scale), _mm512_maskz_loadu_ps(lanes, w_scale + first));
        __m512 value = _mm512_mul_ps(raw, multiplier);
        if (bias) value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(lanes, bias + first));
        if (relu) value = _mm512_max_ps(value, _mm512_setzero_ps());
        _mm512_mask_storeu_ps(row, lanes, value);
        continue;
#endif
        for (int64_t c = 0; c < width; ++c) {
          const float raw = (float)(sums[c] - zero * w_sums[first + c]);
          const float multiplier = scale * w_scale[first + c];
          float value = raw * multiplier;
          if (bias) value = value + bias[first + c];
          row[c] = relu ? (value > 0.f ? value : 0.f) : value;
        }
      }
    }
  }
}

int phrasal_int8_linear(const float *x, int64_t m, int64_t k, const int8_t *w, const int32_t *w_sums,
                        const float *w_scale, const float *bias, int64_t n, int64_t relu, float *out,
                        uint8_t *quantized) {
  int8_linear(x, m, k, w, w_sums, w_scale, bias, n, relu, out, quantized);
  return 0;
}

/* A float32 linear layer for the fused float32 step: out (m, n) = x (m, k) · wᵀ + bias, then the
 * ReLU where asked. w is packed in blocks of 16 output channels, each (k, 16) (k rows of the 16
 * channels' weights; n padded with zero weights to a multiple of 16). Each output sums its k
 * products in order (when m % 4 == 1, the last row in four interleaved sums), then adds the bias:
 * another order than PyTorch's GEMM, so it equals F.linear up to float rounding
 * (export/kernels_check.py verifies the decoder per model). The order of each output's sum does
 * not depend on how rows and channels are tiled, so every tiling gives the same numbers.
 * GCC folds the FMA intrinsics into multiplies and adds, which -fassociative-math (FLAGS in
 * __init__.py, for the other kernels) would regroup differently per tile shape: not here.
 * tests/model/test_kernel_backend.py checks the order exactly. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-associative-math")
#endif
/* The bias, the ReLU and the store of one row's sums of 16 channels from `first` (fewer at the end). */
static inline void float_store_sums(const float *sums, const float *bias, int64_t first, int64_t n, int64_t relu,
                                    float *row) {
  for (int64_t c = 0; c < n - first && c < 16; ++c) {
    const float value = bias ? sums[c] + bias[first + c] : sums[c];
    row[first + c] = relu ? (value > 0.f ? value : 0.f) : value;
  }
}

#if defined(__AVX512F__)
/* float_store_sums on a vector of the 16 sums. */
static inline void float_store(__m512 value, const float *bias, int64_t first, int64_t n, int64_t relu, float *row) {
  const __mmask16 lanes = n - first >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - first)) - 1u);
  if (bias) value = _mm512_add_ps(value, _mm512_maskz_loadu_ps(lanes, bias + first));
  /* max(NaN or -0, +0) gives +0, as the scalar `value > 0 ? value : 0` */
  if (relu) value = _mm512_max_ps(value, _mm512_setzero_ps());
  _mm512_mask_storeu_ps(row + first, lanes, value);
}

/* rows (0..8) of x times `blocks` (1 or 2) packed blocks from channel `first`: up to 16 sums at
 * once, enough to keep both FMA pipes busy (four rows of one block use half of them); with
 * `alone`, the row after them too, in four interleaved sums (the last row when m % 4 == 1, as
 * one row alone is summed), from the same weight loads. Inlined with constant rows, blocks and
 * alone, so the sums stay in registers. */
static inline __attribute__((always_inline)) void float_tile(const float *x, int64_t k, const float *packed,
                                                             const float *bias, int64_t first, int64_t n,
                                                             int64_t relu, float *out, const int rows,
                                                             const int blocks, const int alone) {
  __m512 acc[8][2], part[4][2];
#pragma GCC unroll 8
  for (int r = 0; r < rows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) part[j][0] = part[j][1] = _mm512_setzero_ps();
  const float *next = packed + 16 * k, *last = x + rows * k;
  int64_t d = 0;
  if (alone)
    for (; d + 4 <= k; d += 4) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512 w0 = _mm512_loadu_ps(packed + 16 * (d + j));
        const __m512 w1 = blocks > 1 ? _mm512_loadu_ps(next + 16 * (d + j)) : w0;
#pragma GCC unroll 8
        for (int r = 0; r < rows; ++r) {
          const __m512 v = _mm512_set1_ps(x[r * k + d + j]);
          acc[r][0] = _mm512_fmadd_ps(v, w0, acc[r][0]);
          if (blocks > 1) acc[r][1] = _mm512_fmadd_ps(v, w1, acc[r][1]);
        }
        const __m512 v = _mm512_set1_ps(last[d + j]);
        part[j][0] = _mm512_fmadd_ps(v, w0, part[j][0]);
        if (blocks > 1) part[j][1] = _mm512_fmadd_ps(v, w1, part[j][1]);
      }
    }
  for (; d < k; ++d) {
    const __m512 w0 = _mm512_loadu_ps(packed + 16 * d);
    const __m512 w1 = blocks > 1 ? _mm512_loadu_ps(next + 16 * d) : w0;
#pragma GCC unroll 8
    for (int r = 0; r < rows; ++r) {
      const __m512 v = _mm512_set1_ps(x[r * k + d]);
      acc[r][0] = _mm512_fmadd_ps(v, w0, acc[r][0]);
      if (blocks > 1) acc[r][1] = _mm512_fmadd_ps(v, w1, acc[r][1]);
    }
    if (alone) {
      const __m512 v = _mm512_set1_ps(last[d]);
      part[0][0] = _mm512_fmadd_ps(v, w0, part[0][0]);
      if (blocks > 1) part[0][1] = _mm512_fmadd_ps(v, w1, part[0][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < rows; ++r)
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) float_store(acc[r][b], bias, first + 16 * b, n, relu, out + r * n);
  if (alone)
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) {
      float_store(_mm512_add_ps(_mm512_add_ps(part[0][b], part[1][b]), _mm512_add_ps(part[2][b], part[3][b])),
                  bias, first + 16 * b, n, relu, out + rows * n);
    }
}

static void float_tile_rows(const float *x, int64_t k, const float *packed, const float *bias, int64_t first,
                            int64_t n, int64_t relu, float *out, int64_t rows, int blocks, int alone) {
#define PHRASAL_TILE(R, A)                                                                                 \
  if (rows == R && alone == A) {                                                                           \
    if (blocks > 1)                                                                                        \
      float_tile(x, k, packed, bias, first, n, relu, out, R, 2, A);                                        \
    else                                                                                                   \
      float_tile(x, k, packed, bias, first, n, relu, out, R, 1, A);                                        \
    return;                                                                                                \
  }
  PHRASAL_TILE(8, 0) PHRASAL_TILE(7, 0) PHRASAL_TILE(6, 0) PHRASAL_TILE(5, 0) PHRASAL_TILE(4, 0)
  PHRASAL_TILE(3, 0) PHRASAL_TILE(2, 0) PHRASAL_TILE(1, 0)
  PHRASAL_TILE(7, 1) PHRASAL_TILE(6, 1) PHRASAL_TILE(5, 1) PHRASAL_TILE(4, 1) PHRASAL_TILE(3, 1)
  PHRASAL_TILE(2, 1) PHRASAL_TILE(1, 1) PHRASAL_TILE(0, 1)
#undef PHRASAL_TILE
}
#elif defined(__AVX2__) && defined(__FMA__)
/* The same sums with 8-float vectors (16 registers): tiles of up to 6 rows × 16 outputs (12 sums),
 * the row alone in its own pass (its 8 sums would not fit beside them). */
static inline void float_store_avx2(__m256 low, __m256 high, const float *bias, int64_t first, int64_t n, int64_t relu,
                                    float *row) {
  if (n - first >= 16) {
    if (bias) {
      low = _mm256_add_ps(low, _mm256_loadu_ps(bias + first));
      high = _mm256_add_ps(high, _mm256_loadu_ps(bias + first + 8));
    }
    if (relu) { /* max(NaN or -0, +0) gives +0, as the scalar `value > 0 ? value : 0` */
      low = _mm256_max_ps(low, _mm256_setzero_ps());
      high = _mm256_max_ps(high, _mm256_setzero_ps());
    }
    _mm256_storeu_ps(row + first, low);
    _mm256_storeu_ps(row + first + 8, high);
    return;
  }
  float sums[16];
  _mm256_storeu_ps(sums, low);
  _mm256_storeu_ps(sums + 8, high);
  float_store_sums(sums, bias, first, n, relu, row);
}

static inline __attribute__((always_inline)) void float_tile_avx2(const float *x, int64_t k, const float *packed,
                                                                  const float *bias, int64_t first, int64_t n,
                                                                  int64_t relu, float *out, const int rows) {
  __m256 low[6], high[6];
#pragma GCC unroll 6
  for (int r = 0; r < rows; ++r) low[r] = high[r] = _mm256_setzero_ps();
  for (int64_t d = 0; d < k; ++d) {
    const __m256 w0 = _mm256_loadu_ps(packed + 16 * d), w1 = _mm256_loadu_ps(packed + 16 * d + 8);
#pragma GCC unroll 6
    for (int r = 0; r < rows; ++r) {
      const __m256 v = _mm256_broadcast_ss(x + r * k + d);
      low[r] = _mm256_fmadd_ps(v, w0, low[r]);
      high[r] = _mm256_fmadd_ps(v, w1, high[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < rows; ++r) float_store_avx2(low[r], high[r], bias, first, n, relu, out + r * n);
}

static void float_row_avx2(const float *x, int64_t k, const float *packed, const float *bias, int64_t first,
                           int64_t n, int64_t relu, float *row) {
  __m256 low[4], high[4];
  for (int j = 0; j < 4; ++j) low[j] = high[j] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 4 <= k; d += 4)
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_broadcast_ss(x + d + j);
      low[j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(packed + 16 * (d + j)), low[j]);
      high[j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(packed + 16 * (d + j) + 8), high[j]);
    }
  for (; d < k; ++d) {
    const __m256 v = _mm256_broadcast_ss(x + d);
    low[0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(packed + 16 * d), low[0]);
    high[0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(packed + 16 * d + 8), high[0]);
  }
  float_store_avx2(_mm256_add_ps(_mm256_add_ps(low[0], low[1]), _mm256_add_ps(low[2], low[3])),
                   _mm256_add_ps(_mm256_add_ps(high[0], high[1]), _mm256_add_ps(high[2], high[3])), bias, first, n,
                   relu, row);
}
#endif

static void float_linear(const float *x, int64_t m, int64_t k, const float *w, const float *bias, int64_t n,
                         int64_t relu, float *out) {
  const int64_t blocks = (n + 15) / 16;
#if defined(__AVX512F__)
  const int64_t alone = m % 4 == 1, body = m - alone; /* the last row alone when m % 4 == 1 */
  for (int64_t block = 0; block < blocks; block += 2) {
    /* two blocks (16 KB of weights for k = 128) stay in L1 while every row passes */
    const float *packed = w + block * 16 * k;
    const int pair = blocks - block > 1 ? 2 : 1;
    for (int64_t i = 0; i < m;) {
      const int64_t rows = body - i < 8 ? body - i : 8;
      const int with_alone = alone && i + rows == body && rows < 8;
      if (rows == 0) /* one row alone reads the weights from memory: one block at a time is faster */
        for (int b = 0; b < pair; ++b)
          float_tile_rows(x + i * k, k, packed + b * 16 * k, bias, (block + b) * 16, n, relu, out + i * n, 0, 1, 1);
      else
        float_tile_rows(x + i * k, k, packed, bias, block * 16, n, relu, out + i * n, rows, pair, with_alone);
      i += rows + with_alone;
    }
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const int64_t alone = m % 4 == 1, body = m - alone; /* the last row alone when m % 4 == 1 */
  for (int64_t block = 0; block < blocks; ++block) {
    const float *packed = w + block * 16 * k;
    for (int64_t i = 0; i < body; i += 6) {
      const int64_t rows = body - i < 6 ? body - i : 6;
      const float *xi = x + i * k;
      float *oi = out + i * n;
      switch (rows) {
        case 6: float_tile_avx2(xi, k, packed, bias, block * 16, n, relu, oi, 6); break;
        case 5: float_tile_avx2(xi, k, packed, bias, block * 16, n, relu, oi, 5); break;
        case 4: float_tile_avx2(xi, k, packed, bias, block * 16, n, relu, oi, 4); break;
        case 3: float_tile_avx2(xi, k, packed, bias, block * 16, n, relu, oi, 3); break;
        case 2: float_tile_avx2(xi, k, packed, bias, block * 16, n, relu, oi, 2); break;
        default: float_tile_avx2(xi, k, packed, bias, block * 16, n, relu, oi, 1); break;
      }
    }
    if (alone) float_row_avx2(x + body * k, k, packed, bias, block * 16, n, relu, out + body * n);
  }
#else
  const int64_t alone = m % 4 == 1 ? m - 1 : -1; /* the last row alone when m % 4 == 1 */
  for (int64_t block = 0; block < blocks; ++block) {
    const float *packed = w + block * 16 * k;
    for (int64_t i = 0; i < m; ++i) {
      const float *row_x = x + i * k;
      float acc[16], part[4][16];
      for (int c = 0; c < 16; ++c) acc[c] = part[0][c] = part[1][c] = part[2][c] = part[3][c] = 0.f;
      int64_t d = 0;
      if (i == alone)
        for (; d + 4 <= k; d += 4)
          for (int j = 0; j < 4; ++j) {
            const float v = row_x[d + j];
#pragma omp simd
            for (int c = 0; c < 16; ++c) part[j][c] = fmaf(v, packed[16 * (d + j) + c], part[j][c]);
          }
      float *sums = i == alone ? part[0] : acc;
      for (; d < k; ++d) {
        const float v = row_x[d];
#pragma omp simd
        for (int c = 0; c < 16; ++c) sums[c] = fmaf(v, packed[16 * d + c], sums[c]);
      }
      if (i == alone)
        for (int c = 0; c < 16; ++c) acc[c] = (part[0][c] + part[1][c]) + (part[2][c] + part[3][c]);
      float_store_sums(acc, bias, block * 16, n, relu, out + i * n);
    }
  }
#endif
}

int phrasal_float_linear(const float *x, int64_t m, int64_t k, const float *w, const float *bias, int64_t n,
                         int64_t relu, float *out) {
  float_linear(x, m, k, w, bias, n, relu, out);
  return 0;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* One linear layer of a step plan: packed weights, bias (0: none) and for int8 Σw per row and the
 * scales (0 for float32). */
typedef struct {
  int64_t weights, sums, scales, bias;
} plan_linear;

/* A decoder layer's part of a step plan, every field an address (model/decoding/kernel_backend.py,
 * `FusedStep`): its six linear layers, its three layer norms (weight, bias) and, per search,
 * the projected memory and the self-attention cache's column addresses. */
typedef struct {
  plan_linear qkv, self_out, cross_q, cross_out, up, down;
  int64_t cross_norm[2], ffn_norm[2], after_norm[2];
  int64_t memory_k, memory_v, k_columns, v_columns;
} plan_layer;

/* How a plan's linear layers run: int8 (with `quantized` scratch) or float32. */
typedef struct {
  int64_t int8;
  uint8_t *quantized;
} linear_mode;

static void plan_linear_run(const plan_linear *l, const linear_mode *mode, const float *x, int64_t m, int64_t k,
                            int64_t n, int64_t relu, float *out) {
  if (mode->int8)
    int8_linear(x, m, k, (const int8_t *)l->weights, (const int32_t *)l->sums, (const float *)l->scales,
                (const float *)l->bias, n, relu, out, mode->quantized);
  else
    float_linear(x, m, k, (const float *)l->weights, (const float *)l->bias, n, relu, out);
}

/* The residual sum x += y and the norm after it into h (weight and bias at norm[0], norm[1]). */
static void residual_norm(float *x, const float *y, int64_t m, int64_t d, const int64_t *norm, float eps, float *h) {
  phrasal_add_layer_norm(x, y, m, d, (const float *)norm[0], (const float *)norm[1], eps, x, h);
}

/* A feed-forward sub-layer on h and the residual sum and norm after it; up: m·d_ff floats, y: m·d. */
static void feed_forward(const plan_linear *up_layer, const plan_linear *down_layer, const int64_t *norm,
                         const linear_mode *mode, float *x, float *h, int64_t m, int64_t d, int64_t d_ff, float eps,
                         float *up, float *y) {
  plan_linear_run(up_layer, mode, h, m, d, d_ff, 1, up);
  plan_linear_run(down_layer, mode, up, m, d_ff, d, 0, y);
  residual_norm(x, y, m, d, norm, eps, h);
}

/* The whole decoder of one step in one call: what KernelBackend._layers does with one call per
 * linear layer, attention and norm, without ~3 µs of Python and ctypes around each of its ~45
 * calls. int8: the same functions in the same order, so the same
 * numbers; float32 (int8 0): float_linear in place of PyTorch's GEMM, equal up to rounding.
 * x (m, d) is the embedded input (becomes the residual stream); qkv (layers, m, 3d) receives each layer's
 * projections, whose keys and values are this step's cache column (the caller has put their
 * addresses in column `steps - 1`); first_norm: the addresses of the norm before layer 0's
 * self-attention (weight, bias); h (m, d) receives the final norm's output, attention (m,
 * length) the alignment layer's head-averaged attention. work: 3·m·d + m·d_ff floats; quantized:
 * int8_linear.py's scratch_bytes(m, max(d, d_ff)) (int8 only). Returns 1 where an attention exceeds the kernels' limits. */
int phrasal_decoder_step(const plan_layer *plan, int64_t n_layers, const int64_t *first_norm, float eps, float *x,
                         int64_t m, int64_t d, int64_t d_ff, int64_t n_heads, float scale, const int32_t *table,
                         int64_t table_stride, int64_t steps, const int32_t *sentence, const uint8_t *keep,
                         int64_t keep_stride, int64_t length, int64_t aligned_layer, int64_t int8, float *qkv, float *h, float *attention, float *work,
                         uint8_t *quantized) {
  const int64_t dh = d / n_heads;
  const linear_mode mode = {int8, quantized};
  float *context = work, *y = work + m * d, *q = work + 2 * m * d, *up = work + 3 * m * d;
  residual_norm(x, 0, m, d, first_norm, eps, h);
  for (int64_t l = 0; l < n_layers; ++l) {
    const plan_layer *p = plan + l;
    float *projected = qkv + l * m * 3 * d;
    plan_linear_run(&p->qkv, &mode, h, m, d, 3 * d, 0, projected);
    if (phrasal_self_attention(projected, 3 * d, (const int64_t *)p->k_columns, (const int64_t *)p->v_columns, 3 * d,
                               table, table_stride, m, n_heads, steps, dh, scale, context, d))
      return 1;
    plan_linear_run(&p->self_out, &mode, context, m, d, d, 0, y);
    residual_norm(x, y, m, d, p->cross_norm, eps, h);
    plan_linear_run(&p->cross_q, &mode, h, m, d, d, 0, q);
    if (phrasal_cross_attention(q, d, (const float *)p->memory_k, (const float *)p->memory_v, d, length * d, sentence,
                                keep, keep_stride, m, n_heads, length, dh, scale, context, d,
                                l == aligned_layer ? attention : 0))
      return 1;
    plan_linear_run(&p->cross_out, &mode, context, m, d, d, 0, y);
    residual_norm(x, y, m, d, p->ffn_norm, eps, h);
    feed_forward(&p->up, &p->down, p->after_norm, &mode, x, h, m, d, d_ff, eps, up, y);
  }
  return 0;
}

/* An encoder layer's part of an encoder plan (kernel_backend.py, `FusedEncoder`): its four linear
 * layers (query/key/value fused, the attention's output, the feed-forward's two) and the norms
 * after its attention and after its feed-forward (the next layer's first norm, or the encoder's
 * final one). */
typedef struct {
  plan_linear qkv, self_out, up, down;
  int64_t ffn_norm[2], after_norm[2];
} plan_encoder_layer;

/* The pre-norm encoder over `rows` source positions (sentence-major: row r is position r % length
 * of sentence r / length) in one call: what KernelBackend._encode does, its self-attention in the
 * cross-attention kernel (each position attends to its own sentence's keys where keep is nonzero)
 * in place of PyTorch's fused attention, and its linear layers as phrasal_decoder_step's. x (rows,
 * d): the embedded source (becomes the residual stream); h (rows, d) receives the final norm's
 * output; qkv: rows·3d floats, work: rows·(2d + d_ff) floats, quantized (int8):
 * int8_linear.py's scratch_bytes(rows, max(d, d_ff)). Returns 1 where the source exceeds the attention kernel's limits. */
int phrasal_encoder(const plan_encoder_layer *plan, int64_t n_layers, const int64_t *first_norm, float eps, float *x,
                    int64_t rows, int64_t d, int64_t d_ff, int64_t n_heads, float scale, const int32_t *sentence,
                    const uint8_t *keep, int64_t length, int64_t int8, float *h, float *qkv,
                    float *work, uint8_t *quantized) {
  const int64_t dh = d / n_heads, m = rows;
  const linear_mode mode = {int8, quantized};
  float *context = work, *y = work + rows * d, *up = work + 2 * rows * d;
  residual_norm(x, 0, rows, d, first_norm, eps, h);
  for (int64_t l = 0; l < n_layers; ++l) {
    const plan_encoder_layer *p = plan + l;
    plan_linear_run(&p->qkv, &mode, h, m, d, 3 * d, 0, qkv);
    if (phrasal_cross_attention(qkv, 3 * d, qkv + d, qkv + 2 * d, 3 * d, length * 3 * d, sentence, keep, length, m,
                                n_heads, length, dh, scale, context, d, 0))
      return 1;
    plan_linear_run(&p->self_out, &mode, context, m, d, d, 0, y);
    residual_norm(x, y, m, d, p->ffn_norm, eps, h);
    feed_forward(&p->up, &p->down, p->after_norm, &mode, x, h, m, d, d_ff, eps, up, y);
  }
  return 0;
}
