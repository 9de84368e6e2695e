// `attograd import`: a Hugging Face model folder (config.json, model.safetensors or a sharded index, the
// tokenizer files) becomes a run folder every reading tool opens: config.json in attograd's schema with the
// family's model options, checkpoint/model.safetensors under attograd's parameter names, the tokenizer
// files copied, and imported.json saying what it came from. docs/import.md gives each family's mapping.
//
// Families and what each convention maps to (each read from the family's published modeling code):
//   gpt2      Conv1D weights stored (in, out), transposed; c_attn's fused columns split into Wq, Wk, Wv;
//             learned positions, LayerNorm, GELU (gelu_new: tanh form, gelu: exact), tied unembedding.
//   gpt_neox  query_key_value's rows laid out per head [h][q, k, v][dk], gathered into Wq, Wk, Wv; partial
//             rotary (rotary_pct) with the rotate-half layout and rotary_emb_base; use_parallel_residual.
//   llama     RMSNorm (rms_norm_eps), rotate-half rotary with rope_theta, SwiGLU (gate, up, down), no biases.
//   gpt_neo   nn.Linear weights, q/k/v without biases, attn_scale none, attention_types expanded to one
//             attn_window per layer (0 global, window_size local).
// Options written into the config's JSON (model.n_kv_heads for Llama's num_key_value_heads, model.attn_window
// for GPT-Neo's local layers) are checked against this build's config first: a model that needs one the
// build lacks is refused in one line naming it.
//
// Memory: without `process`, each source tensor is read from the mapped file, converted and written, then its
// pages are released, so an import holds about one tensor at a time besides the file's page cache; `process`
// then reads the written checkpoint back and holds the model twice (it and its processed copy).
#pragma once

#include <string>

#include "analysis/tool.h"
#include "findings/import_view.h"

namespace imports {

struct ImportRequest {
  std::string src;              // the Hugging Face model folder
  std::string out;              // the run folder to write (new, or empty)
  std::string family = "auto";  // auto (config.json's model_type), gpt2, gpt_neo, gpt_neox or llama
  // Save the weights TransformerLens's from_pretrained would give (every step of analysis/processing.h:
  // fold_ln, center_writing_weights, center_unembed, fold_value_biases) instead of the source's. The run is
  // then untied (model.tie_embeddings false) and imported.json lists what each step did.
  bool process = false;
  // A UTF-8 text file for the run's tools to draw sequences from (sae, eval, circuits' attribution, detect),
  // encoded by the model's tokenizer.json: the run's task is then text (unit "bpe") over it instead of
  // pretrained, which has no data. Empty: no data.
  std::string text;
};

// Imports the model; RequestError naming the field for a bad request, std::invalid_argument for a source
// that cannot be imported (one line naming the file and the field or tensor).
analysis::Output<findings::ImportReport> import_model(const ImportRequest& request);

}  // namespace imports
