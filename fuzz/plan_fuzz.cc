// libFuzzer target: ReadPlanFromMemory over arbitrary bytes must return a
// Status or a plan whose every tensor (an int8 plan's weights, scales and
// check among them) lies in memory it may read and whose tokenizer works.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bertrt/int8_weights.h"
#include "bertrt/plan.h"

namespace {

void Touch(const bertrt::Tensor& t, volatile float& sink) {
  if (t.empty()) return;  // heads without a pooler or classifier
  const float* p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) sink = sink + p[i];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A private copy: its exact size lets ASan flag any read past the end.
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(data), size);
  auto plan = bertrt::ReadPlanFromMemory(*bytes, bytes, "fuzz.plan");
  if (!plan.ok()) return 0;
  volatile float sink = 0;
  const bertrt::ModelWeights& w = plan->model->weights;
  for (const bertrt::Tensor* t : {&w.word_embeddings, &w.position_embeddings,
                                  &w.token_type_embeddings, &w.pooler_w, &w.classifier_w})
    Touch(*t, sink);
  for (const bertrt::LayerWeights& l : w.layers) {
    Touch(l.query_w, sink);
    Touch(l.value_w, sink);
    Touch(l.ffn_out_w, sink);
  }
  if (const bertrt::Int8Weights* int8 = plan->model->int8.get()) {
    for (const auto& [name, l] : int8->linears) {
      const auto* q = static_cast<const int8_t*>(l.weights.raw());
      for (int64_t i = 0; i < l.weights.numel(); ++i) sink = sink + q[i];
      Touch(l.scales, sink);
      Touch(l.smoothing, sink);
    }
    for (const bertrt::NamedOutput& o : int8->check_outputs.outputs)
      for (float v : o.data) sink = sink + v;
  }
  auto enc = plan->tokenizer->Encode("fuzz the plan 模型", std::string_view("pair"), 16);
  (void)enc;
  return 0;
}
