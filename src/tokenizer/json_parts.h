// Pieces of tokenizer.json parsing shared by the WordPiece loader and the
// component pipeline's.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bertrt/tokenizer.h"
#include "tokenizer/post_processor.h"

namespace bertrt::tokenizer {

// The "type" of a component object, "?" when it has none.
std::string TypeOf(const nlohmann::json& j);

// What a post_processor does besides its template: ByteLevel offset
// trimming (ByteLevel, or RobertaProcessing's trim_offsets).
struct OffsetTrim {
  bool on = false;
  bool add_prefix_space = false;
};

// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and a
// Sequence of them. Names the template's first and last special tokens as
// cls_token and sep_token in `settings`.
StatusOr<PostProcessor> ParsePostProcessor(const nlohmann::json& pp, TokenizerSettings& settings,
                                           OffsetTrim* trim);

// BertProcessing's template: [CLS] A [SEP] (type 0) and B [SEP] (type 1).
PostProcessor BertTemplate(int32_t cls, int32_t sep);

// The component pipeline for any tokenizer.json that is not BERT WordPiece.
StatusOr<std::shared_ptr<Tokenizer>> LoadPipelineTokenizer(const nlohmann::json& root);

}  // namespace bertrt::tokenizer
