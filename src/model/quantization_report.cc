#include "model/quantization_report.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/outputs.h"

namespace bertrt::model {
namespace {

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i)
    ab += double{a[i]} * b[i], aa += double{a[i]} * a[i], bb += double{b[i]} * b[i];
  if (aa == 0 && bb == 0) return 1.0;
  return ab / std::sqrt(std::max(aa * bb, 1e-300));
}

// The indices of row q's `k` nearest other rows of `rows` [n, width] by cosine.
std::vector<int> Nearest(const std::vector<const float*>& rows, int width, int q, int k) {
  std::vector<std::pair<double, int>> scored;
  for (int j = 0; j < static_cast<int>(rows.size()); ++j)
    if (j != q) scored.push_back({-Cosine(rows[q], rows[j], width), j});
  k = std::min<int>(k, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + k, scored.end());
  std::vector<int> out;
  for (int i = 0; i < k; ++i) out.push_back(scored[i].second);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<OutputAccuracy> CompareOutputs(const std::vector<OutputDescription>& outputs,
                                           const std::vector<RaggedBatch>& batches,
                                           const std::vector<BatchOutputs>& reference,
                                           const std::vector<BatchOutputs>& quantized) {
  std::vector<OutputAccuracy> report;
  // Question answering: whether each sequence's span ends (start and end
  // logits' argmax) agree, per sequence in batch order, and their entries.
  std::vector<std::vector<bool>> span_ends;
  std::vector<size_t> span_entries;
  for (const OutputDescription& o : outputs) {
    if (o.on_request) continue;  // last_hidden_state: not run for the report
    OutputAccuracy a;
    a.output = o.name;
    double cosine_sum = 0, cosine_squares = 0;
    int agree = 0;
    // Question answering's start or end logits: a row per sequence.
    const bool span_end = o.per_token && o.width == 1 && o.argmax;
    std::vector<bool> agreed;  // per row, for the span
    std::vector<const float*> ref_rows, q_rows;  // every row, for retrieval
    for (size_t b = 0; b < batches.size() && b < reference.size() && b < quantized.size(); ++b) {
      const NamedOutput* r = reference[b].Find(o.name);
      const NamedOutput* q = quantized[b].Find(o.name);
      if (!r || !q || r->data.size() != q->data.size() || r->width != o.width) continue;
      const std::vector<ComparedRow> rr = ComparedRows(*r, batches[b]),
                                     qr = ComparedRows(*q, batches[b]);
      for (size_t i = 0; i < rr.size() && i < qr.size(); ++i) {
        const float *x = rr[i].data, *y = qr[i].data;
        const int n = static_cast<int>(rr[i].n);
        const double c = Cosine(x, y, n);
        cosine_sum += c;
        cosine_squares += c * c;
        a.cosine_min = a.rows ? std::min(a.cosine_min, c) : c;
        for (int k = 0; k < n; ++k)
          a.max_abs_error = std::max(a.max_abs_error, double{std::abs(x[k] - y[k])});
        if (o.argmax) {
          const bool same = std::max_element(x, x + n) - x == std::max_element(y, y + n) - y;
          agree += same;
          if (span_end) agreed.push_back(same);
        }
        ref_rows.push_back(x);
        q_rows.push_back(y);
        ++a.rows;
      }
    }
    if (a.rows == 0) continue;
    a.cosine_mean = cosine_sum / a.rows;
    if (a.rows > 1) {
      const double variance =
          std::max(0.0, (cosine_squares - a.rows * a.cosine_mean * a.cosine_mean) / (a.rows - 1));
      a.cosine_mean_stderr = std::sqrt(variance / a.rows);
    }
    if (o.argmax) a.argmax_agreement = double(agree) / a.rows;
    if (span_end) {
      span_ends.push_back(std::move(agreed));
      span_entries.push_back(report.size());
    }
    if (o.sequence_vector && !o.sparse && a.rows > 1) {
      double overlap = 0;
      const int k = std::min(10, a.rows - 1);
      for (int i = 0; i < a.rows; ++i) {
        const std::vector<int> want = Nearest(ref_rows, o.width, i, k),
                               got = Nearest(q_rows, o.width, i, k);
        std::vector<int> common;
        std::set_intersection(want.begin(), want.end(), got.begin(), got.end(),
                              std::back_inserter(common));
        overlap += double(common.size()) / k;
      }
      a.top10_overlap = overlap / a.rows;
    }
    report.push_back(a);
  }
  // The answer span: start and end both where fp32 put them. Its cosines are
  // its ends' worst.
  if (span_ends.size() == 2 && span_ends[0].size() == span_ends[1].size() &&
      !span_ends[0].empty()) {
    OutputAccuracy span;
    span.output = "answer span";
    span.rows = static_cast<int>(span_ends[0].size());
    int agree = 0;
    for (int i = 0; i < span.rows; ++i) agree += span_ends[0][i] && span_ends[1][i];
    span.argmax_agreement = double(agree) / span.rows;
    const OutputAccuracy &start = report[span_entries[0]], &end = report[span_entries[1]];
    const OutputAccuracy& lower = start.cosine_mean <= end.cosine_mean ? start : end;
    span.cosine_mean = lower.cosine_mean;
    span.cosine_mean_stderr = lower.cosine_mean_stderr;
    span.cosine_min = std::min(start.cosine_min, end.cosine_min);
    span.max_abs_error = std::max(start.max_abs_error, end.max_abs_error);
    report.push_back(span);
  }
  return report;
}

}  // namespace bertrt::model
