// Verification of a built plan: the same texts through the fp32 reference
// engine (the HF directory) and the plan's engine, compared on the head's
// outputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bertrt/quantized_weights.h"
#include "bertrt/self_check.h"
#include "model/outputs.h"

namespace bertrt {

std::vector<VerifySample> BuiltInVerifySamples() {
  std::string long_text;
  for (int i = 0; i < 40; ++i)
    long_text += "The plan must give the same answers as the model it was built from, sentence " +
                 std::to_string(i) + " of a long document that is truncated to the model's limit. ";
  return {
      {"bertrt serves fine-tuned BERT encoders fast.", std::nullopt},
      {"今天天气很好，我们去公园散步吧。", std::nullopt},
      {"東京は日本の首都です。", std::nullopt},
      {"Москва — столица России.", std::nullopt},
      {"القاهرة هي عاصمة مصر.", std::nullopt},
      {"Who wrote the plan format?", std::string("The plan format was written by the bertrt team.")},
      {long_text, std::nullopt},
  };
}

StatusOr<std::vector<VerifySample>> ReadVerifySamples(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open the samples file");
  std::vector<VerifySample> samples;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
      return InvalidArgument(where + "expected {\"text\": \"...\", \"text_pair\": \"...\"}");
    VerifySample s{j["text"].get<std::string>(), std::nullopt};
    if (j.contains("text_pair") && !j["text_pair"].is_null()) {
      if (!j["text_pair"].is_string()) return InvalidArgument(where + "\"text_pair\" must be a string");
      s.text_pair = j["text_pair"].get<std::string>();
    }
    samples.push_back(std::move(s));
  }
  if (samples.empty()) return InvalidArgument(path + ": no samples");
  return samples;
}

StatusOr<RaggedBatch> EncodeSamples(const Tokenizer& tokenizer,
                                    const std::vector<VerifySample>& samples, int max_length) {
  RaggedBatch batch;
  for (size_t i = 0; i < samples.size(); ++i) {
    auto enc = tokenizer.Encode(samples[i].text, samples[i].text_pair, static_cast<size_t>(max_length));
    if (!enc.ok())
      return Status(enc.status().code(), "sample " + std::to_string(i + 1) + ": " + enc.status().message());
    batch.Add(enc->input_ids, enc->token_type_ids);
  }
  return batch;
}

StatusOr<VerifyReport> CompareOutputs(const std::vector<OutputDescription>& outputs,
                                      const RaggedBatch& batch, const BatchOutputs& want,
                                      const BatchOutputs& got) {
  VerifyReport report;
  report.samples = batch.num_seqs();
  double sum_abs = 0;
  size_t count = 0;
  for (const OutputDescription& compared : outputs) {
    if (!Returned(compared, /*last_hidden_state=*/false)) continue;
    const std::string& name = compared.name;
    const bool argmax = compared.argmax;
    const NamedOutput* a = want.Find(name);
    const NamedOutput* b = got.Find(name);
    if (!a || !b || a->data.size() != b->data.size() || a->width != b->width)
      return Internal("verify: the engines disagree on the shape of output " + name);
    report.output_name += (report.output_name.empty() ? "" : "+") + name;
    const std::vector<ComparedRow> ra = ComparedRows(*a, batch), rb = ComparedRows(*b, batch);
    for (size_t r = 0; r < ra.size(); ++r) {
      double dot = 0, na = 0, nb = 0, scale = 0, row_diff = 0;
      for (size_t i = 0; i < ra[r].n; ++i) {
        const double x = ra[r].data[i], y = rb[r].data[i];
        const double d = std::fabs(x - y);
        // NaN compares false everywhere: make it the worst difference.
        row_diff = std::isnan(d) ? INFINITY : std::max(row_diff, d);
        report.max_abs_reference = std::max(report.max_abs_reference, std::fabs(x));
        scale = std::max(scale, std::fabs(x));
        sum_abs += d;
        dot += x * y;
        na += x * x;
        nb += y * y;
      }
      count += ra[r].n;
      report.max_abs_diff = std::max(report.max_abs_diff, row_diff);
      double cosine = na == 0 && nb == 0 ? 1.0 : dot / std::sqrt(na * nb);
      if (std::isnan(cosine)) cosine = -1.0;
      report.min_cosine = std::min(report.min_cosine, cosine);
      if (!argmax) {
        report.min_cosine_vectors = std::min(report.min_cosine_vectors, cosine);
        continue;
      }
      report.min_cosine_scores = std::min(report.min_cosine_scores, cosine);
      report.max_abs_diff_scores = std::max(report.max_abs_diff_scores, row_diff);
      report.max_abs_reference_scores = std::max(report.max_abs_reference_scores, scale);
      if (ra[r].n > 0) {
        ++report.argmax_total;
        const size_t want_class = std::max_element(ra[r].data, ra[r].data + ra[r].n) - ra[r].data;
        const size_t got_class = std::max_element(rb[r].data, rb[r].data + rb[r].n) - rb[r].data;
        const bool near_tie = ra[r].data[want_class] - ra[r].data[got_class] <= 0.01 * scale;
        report.argmax_equal += want_class == got_class || near_tie;
      }
    }
  }
  // A BertModel without its pooler returns nothing unasked.
  if (report.output_name.empty())
    return InvalidArgument(std::string("verify: the model returns nothing but ") +
                           kLastHiddenState + " (a BertModel without its pooler) to compare");
  report.mean_abs_diff = count ? sum_abs / static_cast<double>(count) : 0;
  return report;
}

StatusOr<VerifyReport> CompareEngines(const std::vector<OutputDescription>& outputs,
                                      Engine& reference, Engine& candidate,
                                      const Tokenizer& tokenizer,
                                      const std::vector<VerifySample>& samples, int max_length) {
  ASSIGN_OR_RETURN(const RaggedBatch batch, EncodeSamples(tokenizer, samples, max_length));
  ASSIGN_OR_RETURN(BatchOutputs want, reference.Run(batch, {}));
  ASSIGN_OR_RETURN(BatchOutputs got, candidate.Run(batch, {}));
  return CompareOutputs(outputs, batch, want, got);
}

Status CheckVerifyThresholds(const VerifyReport& r, Precision precision) {
  if (precision == Precision::kFp32) {
    const double limit = 1e-4 * std::max(1.0, r.max_abs_reference);
    if (!(r.max_abs_diff <= limit))
      return FailedPrecondition("max abs diff " + std::to_string(r.max_abs_diff) +
                                " is above the fp32 threshold " + std::to_string(limit));
    return Status::Ok();
  }
  if (!(r.min_cosine_vectors >= 0.999))
    return FailedPrecondition("min cosine " + std::to_string(r.min_cosine_vectors) +
                              " is below the threshold 0.999");
  const double rounding = precision == Precision::kBf16 ? 0x1p-8 : 0x1p-11;
  const double scores_limit = 16 * rounding * std::max(1.0, r.max_abs_reference_scores);
  if (!(r.min_cosine_scores >= 0.999) && !(r.max_abs_diff_scores <= scores_limit))
    return FailedPrecondition("min cosine " + std::to_string(r.min_cosine_scores) +
                              " is below the threshold 0.999 and max abs diff " +
                              std::to_string(r.max_abs_diff_scores) + " is above " +
                              std::to_string(scores_limit));
  if (r.argmax_equal != r.argmax_total)
    return FailedPrecondition("argmax agrees on " + std::to_string(r.argmax_equal) + " of " +
                              std::to_string(r.argmax_total) + " rows; all must");
  return Status::Ok();
}

std::string DescribeReport(const VerifyReport& r) {
  char text[200];
  std::snprintf(text, sizeof(text), "max abs diff %.3g, mean %.3g, min cosine %.6f", r.max_abs_diff,
                r.mean_abs_diff, r.min_cosine);
  std::string out = text;
  if (r.argmax_total > 0)
    out += ", argmax " + std::to_string(r.argmax_equal) + "/" + std::to_string(r.argmax_total);
  return out;
}

StatusOr<EngineSelfCheck> EngineSelfCheck::Create(std::shared_ptr<const Model> model,
                                                  const Tokenizer& tokenizer) {
  EngineSelfCheck check;
  check.outputs_ = DescribeOutputs(*model);
  // The long sample runs at the model's full length (up to 512), where the
  // GPU kernels take their long-sequence paths.
  ASSIGN_OR_RETURN(check.batch_, EncodeSamples(tokenizer, BuiltInVerifySamples(),
                                               std::min(model->config.max_seq_length, 512)));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> cpu,
                   CreateCpuEngine(WithFloat32Weights(std::move(model)), {}));
  ASSIGN_OR_RETURN(check.reference_, cpu->Run(check.batch_, {}));
  return check;
}

StatusOr<VerifyReport> EngineSelfCheck::Check(Engine& engine, Precision precision) const {
  ASSIGN_OR_RETURN(const BatchOutputs got, engine.Run(batch_, {}));
  ASSIGN_OR_RETURN(VerifyReport report, CompareOutputs(outputs_, batch_, reference_, got));
  if (Status within = CheckVerifyThresholds(report, precision); !within.ok())
    return FailedPrecondition(
        "self-check failed: " + engine.device() + " disagrees with the CPU engine in fp32 on " +
        std::to_string(report.samples) + " built-in samples (" + report.output_name + ": " +
        DescribeReport(report) + "): " + within.message() +
        ". This engine would serve wrong numbers; please report it with the model's "
        "config.json. --skip-verify starts without this check");
  return report;
}

namespace {

// 8 bits where the activations are not the quantizing engine's (a GPU's
// fp16): `ours` and `theirs` are this engine's and the quantizing engine's
// answers against fp32's on the same samples. Each is one draw of the 8-bit
// error, as the two round different neighbours of the same activations (the
// CPU's fp32 ones, the GPU's fp16 ones); this engine may err twice as
// much (twice the angle, the largest difference, the argmax flips) and never
// need be closer than bf16's thresholds. A GEMM that computes something else
// (a wrong scale, layout or operand) lands far outside.
Status WithinQuantizationError(const VerifyReport& ours, const VerifyReport& theirs) {
  auto twice_the_angle = [](double cosine) {
    return std::min(0.999, cosine > 0 ? 2 * cosine * cosine - 1 : -1.0);
  };
  auto text = [](double v) { return std::to_string(v); };
  const double vectors = twice_the_angle(theirs.min_cosine_vectors);
  if (!(ours.min_cosine_vectors >= vectors))
    return FailedPrecondition("against fp32, min cosine " + text(ours.min_cosine_vectors) +
                              " is below " + text(vectors) + " (the quantizing engine's " +
                              text(theirs.min_cosine_vectors) + ", twice the angle)");
  const double scores = twice_the_angle(theirs.min_cosine_scores);
  const double scores_limit = std::max(16 * 0x1p-8 * std::max(1.0, ours.max_abs_reference_scores),
                                       2 * theirs.max_abs_diff_scores);
  if (!(ours.min_cosine_scores >= scores) && !(ours.max_abs_diff_scores <= scores_limit))
    return FailedPrecondition("against fp32, min cosine " + text(ours.min_cosine_scores) +
                              " is below " + text(scores) + " and max abs diff " +
                              text(ours.max_abs_diff_scores) + " above " + text(scores_limit) +
                              " (the quantizing engine's " + text(theirs.min_cosine_scores) +
                              " and " + text(theirs.max_abs_diff_scores) + ")");
  const int flips = ours.argmax_total - ours.argmax_equal,
            allowed = 2 * (theirs.argmax_total - theirs.argmax_equal);
  if (flips > allowed)
    return FailedPrecondition("against fp32, argmax differs on " + std::to_string(flips) +
                              " of " + std::to_string(ours.argmax_total) +
                              " rows (the quantizing engine's " + std::to_string(allowed / 2) +
                              ")");
  return Status::Ok();
}

}  // namespace

std::string QuantizedCheck::Describe() const {
  if (!ours_vs_fp32)
    return "the answers of the engine that quantized the model reproduced (" +
           DescribeReport(reproduced) + ")";
  return "as close to the fp32 model's answers as the quantizing engine's (this engine: " +
         DescribeReport(*ours_vs_fp32) + "; the quantizing engine: " +
         DescribeReport(*theirs_vs_fp32) + "; the two: " + DescribeReport(reproduced) + ")";
}

StatusOr<QuantizedCheck> CheckQuantizedReproduced(const Model& model, Engine& engine) {
  if (!model.quantized) return InvalidArgument(model.source + ": not an 8-bit model");
  const QuantizedWeights& q = *model.quantized;
  const std::string format = QuantFormatName(q.format);
  // Every output the check holds (last_hidden_state when the model returns
  // nothing unasked) is compared.
  std::vector<OutputDescription> described = DescribeOutputs(model);
  RunOptions options;
  for (OutputDescription& d : described)
    if (d.on_request && q.check_outputs.Find(d.name)) {
      d.on_request = false;
      options.last_hidden_state = true;
    }
  ASSIGN_OR_RETURN(const BatchOutputs outputs, engine.Run(q.check_batch, options));
  ASSIGN_OR_RETURN(const VerifyReport report,
                   CompareOutputs(described, q.check_batch, q.check_outputs, outputs));
  Status within = CheckVerifyThresholds(report, Precision::kBf16);
  if (!within.ok() && !q.check_reference.outputs.empty()) {
    ASSIGN_OR_RETURN(const VerifyReport ours,
                     CompareOutputs(described, q.check_batch, q.check_reference, outputs));
    ASSIGN_OR_RETURN(const VerifyReport theirs, CompareOutputs(described, q.check_batch,
                                                               q.check_reference, q.check_outputs));
    const Status error = WithinQuantizationError(ours, theirs);
    if (error.ok()) return QuantizedCheck{report, ours, theirs};
    within = FailedPrecondition(within.message() + "; " + error.message());
  }
  if (!within.ok())
    return FailedPrecondition(
        model.source + ": this engine's (" + engine.device() + ") " + format +
        " answers differ from those of the machine that quantized the model (" +
        report.output_name + " on " + std::to_string(report.samples) +
        " samples: " + DescribeReport(report) + "): " + within.message() +
        "; its accuracy report does not hold here. Build the " + format +
        " plan on this machine, or serve the fp32 model");
  return QuantizedCheck{report, std::nullopt, std::nullopt};
}

}  // namespace bertrt
