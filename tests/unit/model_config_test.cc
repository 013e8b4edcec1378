// config.pbtxt parsing: Triton's text format through protobuf, checked into
// plain settings; every mistake is an error that names the file, the line or
// the field, and how to fix it.
#include "server/common/model_config.h"

#include <gtest/gtest.h>

#include "bertrt/devices.h"
#include "serving/model_registry.h"

namespace bertrt::server {
using serving::InstanceGroup;
using serving::InstanceSpec;
using serving::ModelConfigFile;
using serving::ParseWarmupShape;
using serving::ResolveServing;
using serving::ServeDefaults;
using serving::VersionPolicy;
namespace {

StatusOr<ModelConfigFile> Parse(const std::string& text) {
  return ParseModelConfig(text, "repo/m/config.pbtxt", "m");
}

void ExpectError(const std::string& text, const std::string& fragment) {
  auto c = Parse(text);
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("repo/m/config.pbtxt"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
}

TEST(ModelConfig, EmptyFileChangesNothing) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->max_batch_size);
  EXPECT_TRUE(c->instance_groups.empty());
  EXPECT_FALSE(c->version_policy);
}

TEST(ModelConfig, TritonStyleConfigParses) {
  auto c = Parse(R"(
    name: "m"
    platform: "bertrt"
    max_batch_size: 32
    version_policy: { latest { num_versions: 2 } }
    dynamic_batching {
      preferred_batch_size: [ 8, 16 ]
      max_queue_delay_microseconds: 500
      default_queue_policy { max_queue_size: 100 default_timeout_microseconds: 2500 }
    }
    instance_group [
      { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] },
      { count: 1 kind: KIND_CPU }
    ]
    parameters { key: "precision" value: { string_value: "bf16" } }
    parameters { key: "max_batch_tokens" value: { string_value: "8192" } }
    parameters { key: "gelu" value: { string_value: "exact" } }
  )");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*c->max_batch_size, 32);
  EXPECT_EQ(c->preferred_batch_sizes, (std::vector<int>{8, 16}));
  EXPECT_EQ(*c->max_queue_delay_us, 500);
  EXPECT_EQ(*c->max_queue_size, 100);
  EXPECT_EQ(*c->request_timeout_us, 2500);
  ASSERT_EQ(c->instance_groups.size(), 2u);
  EXPECT_EQ(c->instance_groups[0].kind, InstanceGroup::Kind::kGpu);
  EXPECT_EQ(c->instance_groups[0].count, 2);
  EXPECT_EQ(c->instance_groups[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c->instance_groups[1].kind, InstanceGroup::Kind::kCpu);
  EXPECT_EQ(c->version_policy->kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(c->version_policy->num_versions, 2);
  EXPECT_EQ(*c->precision, "bf16");
  EXPECT_EQ(*c->max_batch_tokens, 8192);
  EXPECT_EQ(*c->gelu, "exact");
}

TEST(ModelConfig, ShorthandQueueSizeAndOtherPolicies) {
  auto c = Parse("dynamic_batching { max_queue_size: 7 } version_policy { all {} }");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*c->max_queue_size, 7);
  EXPECT_EQ(c->version_policy->kind, VersionPolicy::Kind::kAll);
  c = Parse("version_policy { specific { versions: [1, 3] } }");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->version_policy->versions, (std::vector<int64_t>{1, 3}));
}

TEST(ModelConfig, MistakesAreClearErrors) {
  ExpectError("max_batch_size: 8\nmax_batch_sise: 8\n", "line 2");
  ExpectError("max_batch_sise: 8", "not a field of Triton's model configuration");
  ExpectError("name: \"other\"", "differs from the directory");
  ExpectError("platform: \"ensemble\"", "does not run ensembles");
  ExpectError("ensemble_scheduling { step [ { model_name: \"m\" model_version: -1 } ] }",
              "does not run ensembles");
  ExpectError("instance_group [ { kind: KIND_CPU gpus: [0] } ]", "KIND_CPU");
  ExpectError("instance_group [ { count: -1 } ]", "count");
  ExpectError("max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }",
              "exceeds max_batch_size");
  ExpectError("dynamic_batching { max_queue_size: 3 default_queue_policy { max_queue_size: 4 } }",
              "disagree");
  ExpectError("parameters { key: \"precision\" value { string_value: \"int8\" } }", "int8");
  ExpectError("parameters { key: \"threads\" value { string_value: \"many\" } }", "positive");
  ExpectError("parameters { key: \"gelu\" value { string_value: \"fast\" } }", "tanh or exact");
  ExpectError("version_policy { specific { } }", "at least one version");
  ExpectError("max_batch_size: \"x\"", "line 1");
  ExpectError("dynamic_batching {", "line 1");
}

// What a config written for Triton sets for its own engine is parsed and
// listed once as ignored, never refused.
TEST(ModelConfig, OtherEnginesSettingsAreIgnoredAndListed) {
  auto c = Parse(R"(
    platform: "onnxruntime_onnx"
    backend: "onnxruntime"
    max_batch_size: 8
    input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] } ]
    output [ { name: "pooler_output" data_type: TYPE_FP32 dims: [ 768 ]
               label_filename: "labels.txt" } ]
    instance_group [ { kind: KIND_MODEL profile: "1" } ]
    optimization { graph : { level : 1 }
      execution_accelerators { gpu_execution_accelerator : [ {
        name : "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ] } }
    dynamic_batching { preserve_ordering: true }
    parameters { key: "execution_mode" value: { string_value: "1" } }
    parameters { key: "cudnn_conv_algo_search" value: { string_value: "0" } }
    parameters { key: "precision" value: { string_value: "fp16" } }
    response_cache { enable: true }
  )");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(*c->precision, "fp16");
  ASSERT_EQ(c->instance_groups.size(), 1u);
  EXPECT_EQ(c->instance_groups[0].kind, InstanceGroup::Kind::kAuto);
  ASSERT_EQ(c->inputs.size(), 1u);
  EXPECT_EQ(c->inputs[0].data_type, "TYPE_INT32");
  EXPECT_EQ(c->inputs[0].dims, (std::vector<int64_t>{-1}));
  ASSERT_EQ(c->outputs.size(), 1u);
  EXPECT_EQ(c->outputs[0].dims, (std::vector<int64_t>{768}));
  std::string all;
  for (const std::string& line : c->ignored) all += line + "\n";
  for (const char* expected :
       {"platform \"onnxruntime_onnx\"", "backend \"onnxruntime\"", "optimization",
        "instance_group 1: kind KIND_MODEL", "instance_group 1: profile", "preserve_ordering",
        "parameters \"cudnn_conv_algo_search\", \"execution_mode\"",
        "output \"pooler_output\": label_filename", "response_cache"})
    EXPECT_NE(all.find(expected), std::string::npos) << expected << " not in:\n" << all;
  EXPECT_EQ(all.find("precision\""), std::string::npos) << all;  // bertrt's own key
  // bertrt's own settings: nothing ignored.
  auto own = Parse("platform: \"bertrt\" max_batch_size: 4");
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own->ignored.empty());
}

TEST(ModelConfig, ModelWarmupAsTritonUsersWriteItForBert) {
  auto c = Parse(R"(
    max_batch_size: 16
    model_warmup [
      {
        name: "b8_s128"
        batch_size: 8
        inputs { key: "input_ids" value { data_type: TYPE_INT32 dims: [ 128 ] zero_data: true } }
        inputs { key: "attention_mask" value { data_type: TYPE_INT32 dims: [ 128 ] zero_data: true } }
        inputs { key: "token_type_ids" value { data_type: TYPE_INT64 dims: [ 128 ] zero_data: true } }
      },
      {
        batch_size: 1
        count: 3
        inputs { key: "input_ids" value { data_type: TYPE_INT64 dims: [ 7 ] random_data: true } }
      }
    ]
  )");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->warmups.size(), 2u);
  EXPECT_EQ(c->warmups[0].name, "b8_s128");
  EXPECT_EQ(c->warmups[0].batch_size, 8);
  EXPECT_EQ(c->warmups[0].length, 128);
  EXPECT_FALSE(c->warmups[0].random_ids);
  EXPECT_EQ(c->warmups[0].count, 1);
  EXPECT_EQ(c->warmups[1].name, "2");  // unnamed: its position
  EXPECT_EQ(c->warmups[1].length, 7);
  EXPECT_TRUE(c->warmups[1].random_ids);
  EXPECT_EQ(c->warmups[1].count, 3);
  auto resolved = ResolveServing(ServeDefaults{}, *c);
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->warmups.size(), 2u);
}

TEST(ModelConfig, ModelWarmupMistakesAreClearErrors) {
  auto warmup = [](const std::string& body) { return "model_warmup [ { " + body + " } ]"; };
  const std::string ids =
      "inputs { key: \"input_ids\" value { data_type: TYPE_INT32 dims: [ 16 ] "
      "zero_data: true } }";
  ExpectError(warmup("batch_size: 0 " + ids), "batch_size must be at least 1");
  ExpectError("max_batch_size: 4 " + warmup("batch_size: 8 " + ids), "exceeds max_batch_size 4");
  ExpectError(warmup("batch_size: 1"), "needs an input_ids input");
  ExpectError(warmup("batch_size: 1 inputs { key: \"text\" value { data_type: TYPE_STRING "
                     "dims: [ 1 ] zero_data: true } } " +
                     ids),
              "token inputs");
  ExpectError(warmup("batch_size: 1 inputs { key: \"input_ids\" value { data_type: TYPE_FP32 "
                     "dims: [ 16 ] zero_data: true } }"),
              "TYPE_FP32");
  ExpectError(warmup("batch_size: 1 inputs { key: \"input_ids\" value { data_type: TYPE_INT32 "
                     "dims: [ 2, 16 ] zero_data: true } }"),
              "dims must be [sequence length]");
  ExpectError(warmup("batch_size: 1 inputs { key: \"input_ids\" value { data_type: TYPE_INT32 "
                     "dims: [ -1 ] zero_data: true } }"),
              "positive length");
  ExpectError(warmup("batch_size: 1 " + ids +
                     " inputs { key: \"attention_mask\" value { "
                     "data_type: TYPE_INT32 dims: [ 8 ] zero_data: true } }"),
              "dims differ");
  ExpectError(warmup("batch_size: 1 inputs { key: \"input_ids\" value { data_type: TYPE_INT32 "
                     "dims: [ 16 ] input_data_file: \"ids.bin\" } }"),
              "input_data_file is not supported");
}

TEST(ModelConfig, WarmupShapesFromTheCommandLine) {
  auto w = ParseWarmupShape("8x128");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->batch_size, 8);
  EXPECT_EQ(w->length, 128);
  EXPECT_EQ(w->count, 1);
  EXPECT_FALSE(w->is_range());
  auto range = ParseWarmupShape("1-32x100-192");
  ASSERT_TRUE(range.ok()) << range.status().message();
  EXPECT_TRUE(range->is_range());
  EXPECT_EQ(range->batch_size, 1);
  EXPECT_EQ(range->up_to_batch_size, 32);
  EXPECT_EQ(range->length, 100);
  EXPECT_EQ(range->up_to_length, 192);
  auto lengths = ParseWarmupShape("8x64-128");
  ASSERT_TRUE(lengths.ok());
  EXPECT_TRUE(lengths->is_range());
  EXPECT_EQ(lengths->batch_size, 8);
  EXPECT_EQ(lengths->up_to_batch_size, 8);
  EXPECT_EQ(lengths->up_to_length, 128);
  EXPECT_FALSE(ParseWarmupShape("4-4x16-16")->is_range());
  for (const char* bad : {"8", "x128", "0x5", "8x-1", "8x128x2", "", "99999999x1", "8-4x16",
                          "1-x16", "1--3x16", "0-4x16", "4x16-", "4x16-8", "1-2-3x16"}) {
    auto r = ParseWarmupShape(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("BATCHxLENGTH"), std::string::npos) << bad;
  }
  // A config.pbtxt's model_warmup replaces the command line's.
  ServeDefaults d;
  d.warmups = {*w};
  auto none = ResolveServing(d, ModelConfigFile{});
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->warmups.size(), 1u);
  EXPECT_EQ(none->warmups[0].name, "8x128");
  ModelConfigFile c;
  c.warmups = {*ParseWarmupShape("1x7")};
  auto own = ResolveServing(d, c);
  ASSERT_TRUE(own.ok());
  ASSERT_EQ(own->warmups.size(), 1u);
  EXPECT_EQ(own->warmups[0].name, "1x7");
}

TEST(ModelConfig, WarmupShapesAsAParameter) {
  auto c = Parse(R"(max_batch_size: 32
                    parameters { key: "warmup_shapes" value: { string_value: "1-32x100-192,8x128" } }
                    model_warmup [ { batch_size: 2 inputs { key: "input_ids"
                                     value: { data_type: TYPE_INT32 dims: [ 16 ] zero_data: true } } } ])");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->warmups.size(), 3u);  // model_warmup first, then the parameter's shapes
  EXPECT_EQ(c->warmups[0].length, 16);
  EXPECT_TRUE(c->warmups[1].is_range());
  EXPECT_EQ(c->warmups[1].up_to_batch_size, 32);
  EXPECT_EQ(c->warmups[1].up_to_length, 192);
  EXPECT_EQ(c->warmups[2].name, "8x128");
  ExpectError(R"(parameters { key: "warmup_shapes" value: { string_value: "8x" } })",
              "parameters \"warmup_shapes\": warm-up shape \"8x\": expected BATCHxLENGTH");
  ExpectError(R"(parameters { key: "warmup_shapes" value: { string_value: "" } })",
              "parameters \"warmup_shapes\": empty");
  ExpectError(R"(max_batch_size: 4
                 parameters { key: "warmup_shapes" value: { string_value: "8-16x32" } })",
              "\"8-16x32\" starts at batch size 8, over max_batch_size 4");
}

TEST(ModelConfig, MissingFileIsNoConfig) {
  auto c = LoadModelConfig("/nonexistent/dir", "m");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->instance_groups.empty());
}

TEST(ModelConfig, ResolveAppliesConfigOverDefaults) {
  ServeDefaults d;
  d.scheduler.max_batch_size = 64;
  d.threads = 3;
  EXPECT_EQ(d.gelu, "exact");
  auto c = Parse(R"(max_batch_size: 16
                    dynamic_batching { preferred_batch_size: [8, 4] max_queue_delay_microseconds: 100 }
                    instance_group [ { count: 2 kind: KIND_CPU } ]
                    parameters { key: "gelu" value: { string_value: "tanh" } })");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto s = ResolveServing(d, *c);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->scheduler.max_batch_size, 16);
  EXPECT_EQ(s->scheduler.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(s->scheduler.max_queue_delay.count(), 100);
  ASSERT_EQ(s->instances.size(), 2u);
  for (const InstanceSpec& i : s->instances) {
    EXPECT_EQ(i.device, "cpu");
    EXPECT_EQ(i.precision, "fp32");
    EXPECT_EQ(i.threads, 3);
    EXPECT_EQ(i.gelu, "tanh");
  }
  // No config: the command line's device and instance count.
  d.instances = 3;
  s = ResolveServing(d, ModelConfigFile{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->instances.size(), 3u);
}

// Runs everywhere: without a GPU a GPU group is an error that says why and
// KIND_AUTO falls back to the CPU; with GPUs, instances go on each of them.
TEST(ModelConfig, InstanceGroupsFollowTheVisibleGpus) {
  auto gpus = ListGpus();
  auto c = Parse("instance_group [ { kind: KIND_GPU count: 2 } ]");
  ASSERT_TRUE(c.ok());
  auto s = ResolveServing(ServeDefaults{}, *c);
  auto automatic =
      ResolveServing(ServeDefaults{}, *Parse("instance_group [ { kind: KIND_AUTO } ]"));
  ASSERT_TRUE(automatic.ok()) << automatic.status().message();
  if (!gpus.ok()) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.status().message().find("instance_group 1"), std::string::npos)
        << s.status().message();
    EXPECT_EQ(automatic->instances.at(0).device, "cpu");
  } else {
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_EQ(s->instances.size(), 2 * gpus->size());
    for (size_t i = 0; i < s->instances.size(); ++i) {
      EXPECT_EQ(s->instances[i].device, "cuda");
      EXPECT_EQ(s->instances[i].gpu, static_cast<int>(i / 2));
      EXPECT_EQ(s->instances[i].precision, "fp16");
    }
    EXPECT_EQ(automatic->instances.at(0).device, "cuda");
  }
  // A GPU index past the visible ones.
  auto far = ResolveServing(ServeDefaults{}, *Parse("instance_group [ { gpus: [ 64 ] } ]"));
  ASSERT_FALSE(far.ok());
}

}  // namespace
}  // namespace bertrt::server
