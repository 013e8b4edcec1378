// serving::Infer on tiny CPU models: each operation checked against the raw
// run it is made of (the logits, the pooled vector), the model kinds each
// refuses, and the encoding errors it reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "bertrt/engine.h"
#include "model/outputs.h"
#include "serving/infer.h"

namespace bertrt::serving {
namespace {

std::unique_ptr<ServedModel> Serve(const std::string& fixture) {
  ServeDefaults defaults;
  defaults.make_engine = [](std::shared_ptr<const Model> model, const Tokenizer&,
                            const InstanceSpec&) {
    return CreateCpuEngine(std::move(model), {});
  };
  ModelServing serving;
  serving.instances = {{"cpu", 0, "fp32", 1, "exact", {}}};
  auto served = ServedModel::Load(
      fixture, "1", std::string(BERTRT_TEST_DATA_DIR) + "/models/" + fixture, serving, defaults);
  EXPECT_TRUE(served.ok()) << served.status().ToString();
  return served.ok() ? std::move(*served) : nullptr;
}

// One request's Infer, as a front end makes it.
struct Request {
  explicit Request(ServedModel& m) : timer(m, nullptr), infer(m, timer) {}
  RequestTimer timer;
  Infer infer;
};

double Norm(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += double(x) * x;
  return std::sqrt(n);
}

TEST(ServingInfer, PredictRanksTheSoftmaxOfTheRunsLogits) {
  auto m = Serve("seq_cls");
  ASSERT_TRUE(m);
  ASSERT_EQ(KindOf(*m), ModelKind::kClassifier);
  const std::vector<TextInput> inputs{{"a first text", std::nullopt},
                                      {"and a second", std::string("with its pair")}};
  Request raw_run(*m);
  auto seqs = raw_run.infer.Encode(inputs, {});
  ASSERT_TRUE(seqs.ok()) << seqs.status().ToString();
  auto run = raw_run.infer.Run(std::move(*seqs));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const NamedOutput& logits = *run->outputs.Find(LabelScores(*m)->name);

  Request r(*m);
  auto predicted = r.infer.Predict(inputs, {}, {});
  ASSERT_TRUE(predicted.ok()) << predicted.status().ToString();
  ASSERT_EQ(predicted->size(), 2u);
  EXPECT_EQ(r.infer.tokens(), run->cu_seqlens.back());
  for (size_t i = 0; i < 2; ++i) {
    const auto want = ClassScores(logits.data.data() + i * logits.width, logits.width);
    const auto& got = (*predicted)[i];
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_FLOAT_EQ(got[k].score, want[got[k].label]);
      if (k) EXPECT_GE(got[k - 1].score, got[k].score);
    }
  }
  Request raw(*m);
  auto logits_back = raw.infer.Predict(inputs, {}, {.function = serving::ScoreFunction::kNone});
  ASSERT_TRUE(logits_back.ok());
  for (const LabelScore& s : (*logits_back)[0]) EXPECT_FLOAT_EQ(s.score, logits.data[s.label]);
  // The best label alone, its logit through a sigmoid (the HF pipelines' top_k and
  // function_to_apply).
  Request best(*m);
  auto top = best.infer.Predict(inputs, {}, {.function = ScoreFunction::kSigmoid, .top_k = 1});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  for (size_t i = 0; i < 2; ++i) {
    const float* row = logits.data.data() + i * logits.width;
    const int argmax = static_cast<int>(std::max_element(row, row + logits.width) - row);
    ASSERT_EQ((*top)[i].size(), 1u);
    EXPECT_EQ((*top)[i][0].label, argmax);
    EXPECT_FLOAT_EQ((*top)[i][0].score, 1.0f / (1.0f + std::exp(-row[argmax])));
  }

  // A classifier is neither an embedder nor a re-ranker.
  Request wrong(*m);
  EXPECT_EQ(wrong.infer.PrepareEmbed({}).status().code(), StatusCode::kFailedPrecondition);
  auto ranked = wrong.infer.Rerank("q", {"a"}, {}, false);
  EXPECT_EQ(ranked.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(ranked.status().message().find("labels: use /predict with pairs"), std::string::npos);
}

TEST(ServingInfer, EmbedGivesTheModelsVectorsCutAndNormalized) {
  auto m = Serve("sentence_mean");
  ASSERT_TRUE(m);
  ASSERT_EQ(KindOf(*m), ModelKind::kEmbedding);
  Request r(*m);
  auto full = r.infer.PrepareEmbed({});
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  auto rows = r.infer.Embed(*full, {{"one text", {}, {}}, {"another text", {}, {}}}, {});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_NEAR(Norm((*rows)[0]), 1.0, 1e-5);

  Request cut(*m);
  auto two = cut.infer.PrepareEmbed({true, 2});
  ASSERT_TRUE(two.ok());
  auto short_rows = cut.infer.Embed(*two, {{"one text", {}, {}}}, {});
  ASSERT_TRUE(short_rows.ok());
  ASSERT_EQ((*short_rows)[0].size(), 2u);
  EXPECT_NEAR(Norm((*short_rows)[0]), 1.0, 1e-5);
  const double n = std::hypot((*rows)[0][0], (*rows)[0][1]);
  EXPECT_NEAR((*short_rows)[0][0], (*rows)[0][0] / n, 1e-5);

  Request wide(*m);
  EXPECT_EQ(wide.infer.PrepareEmbed({true, 100000}).status().code(), StatusCode::kInvalidArgument);

  Request similar(*m);
  auto sims = similar.infer.Similarity("one text", {"one text", "another text"}, {});
  ASSERT_TRUE(sims.ok()) << sims.status().ToString();
  EXPECT_NEAR((*sims)[0], 1.0, 1e-5);
  double dot = 0;
  for (size_t k = 0; k < (*rows)[0].size(); ++k) dot += double((*rows)[0][k]) * (*rows)[1][k];
  EXPECT_NEAR((*sims)[1], dot, 1e-5);

  Request all(*m);
  auto states = all.infer.EmbedAll({{"one text", {}, {}}}, {});
  ASSERT_TRUE(states.ok()) << states.status().ToString();
  EXPECT_EQ((*states)[0].tokens, all.infer.tokens());
  EXPECT_EQ((*states)[0].values.size(),
            static_cast<size_t>((*states)[0].tokens) * (*states)[0].width);

  // An embedder has no labels to score and no sparse vector.
  Request wrong(*m);
  EXPECT_EQ(wrong.infer.Predict({{"x", std::nullopt}}, {}, {}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(wrong.infer.EmbedSparse({{"x", {}, {}}}, {}).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(ServingInfer, EncodingErrorsNameTheInput) {
  auto m = Serve("seq_cls");
  ASSERT_TRUE(m);
  Request r(*m);
  const int32_t vocab = static_cast<int32_t>(m->tokenizer().vocab_size());
  auto bad_id = r.infer.Encode(std::vector<ModelInput>{{std::nullopt, {1, vocab}, {}}}, {});
  EXPECT_EQ(bad_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_id.status().message().rfind("input 0: ", 0), 0u) << bad_id.status().message();
  auto empty =
      r.infer.Encode(std::vector<TextInput>{{"fine", std::nullopt}, {"", std::nullopt}}, {});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.status().message().rfind("input 1: ", 0), 0u) << empty.status().message();
  std::string words;
  for (int i = 0; i < 2 * m->max_input_length(); ++i) words += "word ";
  auto too_long = r.infer.Encode(std::vector<TextInput>{{words, std::nullopt}}, {});
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  EncodeOptions truncate;
  truncate.truncate = true;
  auto cut = r.infer.Encode(std::vector<TextInput>{{words, std::nullopt}}, truncate);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ((*cut)[0].input_ids.size(), static_cast<size_t>(m->max_input_length()));
}

TEST(ServingInfer, TokenizeGivesByteOffsetsAndDecodeChecksTheVocabulary) {
  auto m = Serve("seq_cls");
  ASSERT_TRUE(m);
  Request r(*m);
  const std::string text = "café au lait";
  auto tokens = r.infer.Tokenize({text}, std::nullopt, /*add_special=*/true);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  const auto& list = (*tokens)[0];
  ASSERT_GE(list.size(), 3u);
  EXPECT_TRUE(list.front().special);
  EXPECT_TRUE(list.back().special);
  for (const Token& t : list) {
    if (t.special) continue;
    ASSERT_LE(t.stop, text.size());
    EXPECT_EQ(text.substr(t.start, t.stop - t.start), t.text);
  }
  Request plain(*m);
  auto without = plain.infer.Tokenize({text}, std::nullopt, /*add_special=*/false);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ((*without)[0].size(), list.size() - 2);
  std::string words;
  for (int i = 0; i < 2 * m->max_input_length(); ++i) words += "word ";
  EXPECT_EQ(plain.infer.Tokenize({words}, std::nullopt, true).status().code(),
            StatusCode::kInvalidArgument);

  std::vector<int32_t> ids;
  for (const Token& t : list) ids.push_back(t.id);
  auto back = r.infer.Decode({ids}, /*skip_special=*/true);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)[0], m->tokenizer().Decode(ids, true));
  const int32_t vocab = static_cast<int32_t>(m->tokenizer().vocab_size());
  EXPECT_EQ(r.infer.Decode({{vocab}}, true).status().code(), StatusCode::kInvalidArgument);
}

TEST(ServingInfer, RunTasksAnswersEachTaskFromItsWindows) {
  auto ner = Serve("token_cls");
  ASSERT_TRUE(ner);
  TokenClassificationOptions by_token;
  by_token.ignore_labels = std::vector<std::string>{};  // every token, "O" too
  auto one = PrepareTokenClassification(*ner, "John lives in Berlin", by_token, 0);
  auto two = PrepareTokenClassification(*ner, "Paris", by_token, 0);
  ASSERT_TRUE(one.ok() && two.ok());
  Request r(*ner);
  auto answers = r.infer.RunTasks({&*one, &*two});
  ASSERT_TRUE(answers.ok()) << answers.status().ToString();
  ASSERT_EQ(answers->size(), 2u);
  const auto& first = std::get<std::vector<Entity>>((*answers)[0]);
  const auto& second = std::get<std::vector<Entity>>((*answers)[1]);
  // Every token but the special ones is an entity when no label is ignored.
  EXPECT_EQ(first.size(), std::get<TokenClassification>(*one).windows()[0].input_ids.size() - 2);
  EXPECT_EQ(second.size(), std::get<TokenClassification>(*two).windows()[0].input_ids.size() - 2);
  EXPECT_EQ(r.infer.tokens(),
            static_cast<int>(std::get<TokenClassification>(*one).windows()[0].input_ids.size() +
                             std::get<TokenClassification>(*two).windows()[0].input_ids.size()));
  EXPECT_EQ(first[0].start, 0u);

  auto qa = Serve("qa");
  ASSERT_TRUE(qa);
  QuestionAnsweringOptions top2;
  top2.top_k = 2;
  const std::string context = "In Paris, near the river.";
  auto question = PrepareQuestionAnswering(*qa, "Where?", context, top2, 0);
  ASSERT_TRUE(question.ok()) << question.status().ToString();
  Request q(*qa);
  auto found = q.infer.RunTasks({&*question});
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  const auto& spans = std::get<std::vector<Answer>>((*found)[0]);
  ASSERT_FALSE(spans.empty());
  EXPECT_LE(spans.size(), 2u);
  for (const Answer& a : spans) {  // an ASCII context: code points are bytes
    ASSERT_LE(a.end, context.size());
    EXPECT_EQ(context.substr(a.start, a.end - a.start), a.answer);
  }
}

}  // namespace
}  // namespace bertrt::serving
