/* llama_score.c - the perplexity helm-rt --perplexity computes, computed by libllama.
 *
 *   llama-score model.gguf IDS WINDOW THREADS
 *
 * IDS is a file of whitespace-separated token ids (the text as tokenized without special tokens).
 * They are cut into windows of WINDOW ids (the last may be shorter; a last window of one id is
 * dropped unless it is the only one), each scored from its own start in a fresh context: the
 * logits at position i predict id i + 1, and the negative log-likelihoods (log-softmax in double)
 * of every window's ids after its first are summed. This is runtime/cli/Run.cpp's definition, so
 * the two programs score the very same predictions; llama.cpp's own llama-perplexity scores the
 * second half of each window after a BOS, a different quantity. Prints one JSON line:
 *   {"perplexity": ..., "scored_tokens": ..., "mean_nll": ..., "windows": ...}
 * The KV cache is f32 without flash attention, as llama-greedy's f32-kv. Built by
 * bench/build-llama-cpp.sh against the libllama it builds. */
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level >= GGML_LOG_LEVEL_ERROR)
    fputs(text, stderr);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: llama-score model.gguf IDS WINDOW THREADS\n");
    return 1;
  }
  int window = atoi(argv[3]), threads = atoi(argv[4]);
  FILE *f = fopen(argv[2], "r");
  if (!f || window < 2 || threads < 1) {
    fprintf(stderr, "llama-score: bad arguments or unreadable %s\n", argv[2]);
    return 1;
  }
  int n = 0, cap = 1024;
  llama_token *ids = malloc(sizeof(llama_token) * (size_t)cap);
  int id;
  while (fscanf(f, "%d", &id) == 1) {
    if (n == cap)
      ids = realloc(ids, sizeof(llama_token) * (size_t)(cap *= 2));
    ids[n++] = id;
  }
  fclose(f);
  if (n < 2) {
    fprintf(stderr, "llama-score: %d ids; perplexity needs at least 2\n", n);
    return 1;
  }

  llama_log_set(quiet_log, NULL);
  llama_backend_init();
  struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) {
    fprintf(stderr, "llama-score: cannot load %s\n", argv[1]);
    return 1;
  }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)window + 16;
  cp.n_batch = cp.n_ubatch = (uint32_t)window;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    fprintf(stderr, "llama-score: cannot create a context\n");
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  struct llama_batch batch = llama_batch_init(window, 0, 1);
  double nll = 0;
  long scored = 0;
  int windows = 0;
  for (int at = 0; at + 1 < n; at += window) {
    int len = n - at < window ? n - at : window;
    if (len < 2 && windows > 0)
      break;
    llama_memory_clear(llama_get_memory(ctx), 1);
    batch.n_tokens = len;
    for (int i = 0; i < len; ++i) {
      batch.token[i] = ids[at + i];
      batch.pos[i] = i;
      batch.n_seq_id[i] = 1;
      batch.seq_id[i][0] = 0;
      batch.logits[i] = i + 1 < len;
    }
    if (llama_decode(ctx, batch) != 0) {
      fprintf(stderr, "llama-score: window %d failed\n", windows);
      return 1;
    }
    for (int i = 0; i + 1 < len; ++i) {
      const float *row = llama_get_logits_ith(ctx, i);
      double top = row[0];
      for (int v = 1; v < n_vocab; ++v)
        top = row[v] > top ? row[v] : top;
      double sum = 0;
      for (int v = 0; v < n_vocab; ++v)
        sum += exp((double)row[v] - top);
      nll += top + log(sum) - (double)row[ids[at + i + 1]];
      ++scored;
    }
    ++windows;
  }
  printf("{\"perplexity\": %.6f, \"scored_tokens\": %ld, \"mean_nll\": %.8f, \"windows\": %d}\n",
         exp(nll / (double)scored), scored, nll / (double)scored, windows);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  free(ids);
  return 0;
}
