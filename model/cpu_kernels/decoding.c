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
