/* llama_greedy.c - greedy decoding from token ids with libllama, for bench/compare_bench.py.
 *
 * llama.cpp's own tools take text prompts; the benchmark feeds every system the same token ids and
 * compares the greedy ids they produce, so this program does only that:
 *
 *   llama-greedy model.gguf 1,2,3 N THREADS [LOGITS.f32 [f32-kv]]
 *
 * decodes the prompt in one batch, then N-1 single-token steps, taking the argmax of the last
 * logits each time (no sampler, no special handling of end-of-sequence). Prints one JSON line:
 *   {"ids": [...], "prefill_ms": ..., "decode_ms": ..., "top2_gap": [...]}
 * with llama.cpp's default context parameters otherwise (f16 KV cache, flash attention auto).
 * LOGITS.f32, when given, receives every step's logits (n_vocab f32 each), the prefill's first.
 * f32-kv keeps the KV cache in f32 without flash attention (llama.cpp's f16 cache rounds K and V,
 * which the end-to-end tests compare around: their reference is llama.cpp's arithmetic otherwise). 
 * Built by bench/build-llama-cpp.sh against the libllama it builds. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level >= GGML_LOG_LEVEL_ERROR)
    fputs(text, stderr);
}

/* argmax of row; *gap = top-1 minus top-2 logit */
static int argmax(const float *row, int n, float *gap) {
  int best = 0;
  float b1 = row[0], b2 = -1e30f;
  for (int i = 1; i < n; ++i) {
    if (row[i] > b1) {
      b2 = b1;
      b1 = row[i];
      best = i;
    } else if (row[i] > b2) {
      b2 = row[i];
    }
  }
  *gap = b1 - b2;
  return best;
}

int main(int argc, char **argv) {
  if (argc < 5 || argc > 7 || (argc == 7 && strcmp(argv[6], "f32-kv") != 0)) {
    fprintf(stderr, "usage: llama-greedy model.gguf ID,ID,... N THREADS [LOGITS.f32 [f32-kv]]\n");
    return 1;
  }
  int n_new = atoi(argv[3]), threads = atoi(argv[4]);
  int n_prompt = 1;
  for (const char *p = argv[2]; *p; ++p)
    n_prompt += *p == ',';
  llama_token *prompt = malloc(sizeof(llama_token) * (size_t)n_prompt);
  char *ids = strdup(argv[2]);
  int k = 0;
  for (char *tok = strtok(ids, ","); tok; tok = strtok(NULL, ","))
    prompt[k++] = (llama_token)atoi(tok);
  n_prompt = k;
  if (n_prompt < 1 || n_new < 1 || threads < 1) {
    fprintf(stderr, "llama-greedy: bad arguments\n");
    return 1;
  }

  llama_log_set(quiet_log, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  struct llama_model *model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    fprintf(stderr, "llama-greedy: cannot load %s\n", argv[1]);
    return 1;
  }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(n_prompt + n_new + 16);
  cp.n_batch = cp.n_ubatch = (uint32_t)n_prompt;
  cp.n_threads = cp.n_threads_batch = threads;
  if (argc == 7) {
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  }
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    fprintf(stderr, "llama-greedy: cannot create a context\n");
    return 1;
  }
  int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  llama_token *out = malloc(sizeof(llama_token) * (size_t)n_new);
  float *gaps = malloc(sizeof(float) * (size_t)n_new);
  double t0 = now_ms();
  if (llama_decode(ctx, llama_batch_get_one(prompt, n_prompt)) != 0) {
    fprintf(stderr, "llama-greedy: prefill failed\n");
    return 1;
  }
  FILE *logits = argc >= 6 ? fopen(argv[5], "wb") : NULL;
  if (argc >= 6 && !logits) {
    fprintf(stderr, "llama-greedy: cannot write %s\n", argv[5]);
    return 1;
  }
  if (logits)
    fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), (size_t)n_vocab, logits);
  out[0] = argmax(llama_get_logits_ith(ctx, -1), n_vocab, &gaps[0]);
  double t1 = now_ms();
  for (int i = 1; i < n_new; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&out[i - 1], 1)) != 0) {
      fprintf(stderr, "llama-greedy: decode step %d failed\n", i);
      return 1;
    }
    if (logits)
      fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), (size_t)n_vocab, logits);
    out[i] = argmax(llama_get_logits_ith(ctx, -1), n_vocab, &gaps[i]);
  }
  if (logits && fclose(logits) != 0) {
    fprintf(stderr, "llama-greedy: cannot write %s\n", argv[5]);
    return 1;
  }
  double t2 = now_ms();

  printf("{\"ids\": [");
  for (int i = 0; i < n_new; ++i)
    printf("%s%d", i ? ", " : "", out[i]);
  printf("], \"top2_gap\": [");
  for (int i = 0; i < n_new; ++i)
    printf("%s%.6g", i ? ", " : "", gaps[i]);
  printf("], \"prefill_ms\": %.3f, \"decode_ms\": %.3f}\n", t1 - t0, t2 - t1);

  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  free(prompt);
  free(ids);
  free(out);
  free(gaps);
  return 0;
}
