#include "model/prompt.h"

namespace bertrt {

StatusOr<int32_t> PromptPoolStart(const ModelConfig& config, const Tokenizer& tokenizer,
                                  const std::string& prompt) {
  if (config.include_prompt || prompt.empty()) return 0;
  ASSIGN_OR_RETURN(Encoding enc, tokenizer.Encode(prompt));
  int32_t n = static_cast<int32_t>(enc.input_ids.size());
  if (n > 0 && enc.special_tokens_mask.back()) --n;
  return n;
}

Status PromptFillsInput(int32_t pool_start, int tokens) {
  return InvalidArgument("the prompt takes " + std::to_string(pool_start) +
                         " tokens, and this model leaves them out of the pooling "
                         "(include_prompt false): of the " + std::to_string(tokens) +
                         " tokens its input is cut to, none of the text is left to pool; "
                         "use a shorter prompt");
}

}  // namespace bertrt
