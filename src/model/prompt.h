// sentence-transformers' prompts: the text put before an input, and where the
// pooling then starts when the model leaves the prompt out (1_Pooling's
// include_prompt false, as instruction-tuned embedders are saved).
#pragma once

#include <cstdint>
#include <string>

#include "bertrt/model.h"
#include "bertrt/status.h"
#include "bertrt/tokenizer.h"

namespace bertrt {

// RaggedBatch::pool_start for any text encoded with `prompt` before it: 0
// when the model pools the prompt too or there is none; else the tokens the
// prompt takes alone, less a trailing special token (sentence-transformers'
// prompt_length: [CLS] and the prompt's own tokens for BERT).
StatusOr<int32_t> PromptPoolStart(const ModelConfig& config, const Tokenizer& tokenizer,
                                  const std::string& prompt);

// The error for a sequence of `tokens` tokens whose prompt (pool_start
// tokens) leaves none of the text to pool: a prompt as long as the model's
// whole input.
Status PromptFillsInput(int32_t pool_start, int tokens);

}  // namespace bertrt
