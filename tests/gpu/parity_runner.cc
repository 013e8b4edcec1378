// bertrt_parity_runner: the engine side of the GPU parity suite
// (tests/gpu/parity.py, scripts/device_parity.sh). It loads one model, runs
// the given batches of token ids on engines of the given configurations and
// writes every output as raw float32, for the suite to compare with Hugging
// Face transformers. Token ids in, not texts, so that the comparison sees
// the engine alone; `bertrt run` is checked end to end by the suite too.
//
// Request (JSON, the one argument):
//   {"model": DIR, "out": DIR, "layers": N (optional: keep the first N),
//    "batches": [{"name": ..., "ids": [[...], ...], "types": [[...], ...],
//                 "alone": bool}],
//    "configs": [{"name": ..., "device": "cuda"|"cpu", "precision": "fp16",
//                 "hidden_state": bool, "repeats": N, "gelu": "exact"|"tanh",
//                 and any of the cuda::Tuning switches below}]}
// Each batch runs `repeats` times on each configuration (the first run
// eager, the later ones from the captured CUDA graph) and, with "alone",
// each of its sequences by itself. Written: OUT/<config>.<batch>.<output>.f32
// (the first run), .alone.f32 (the sequences run alone, in batch order), and
// OUT/index.json: each output's rows and width, and whether every repeat
// gave the same bits as the first.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cuda/engine/tuning.h"
#include "bertrt/cuda_engine.h"
#include "bertrt/engine.h"
#include "bertrt/importer.h"

namespace bertrt {
namespace {

using nlohmann::json;

Status WriteFloats(const std::string& path, const std::vector<float>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()),
          static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!f) return Internal("cannot write " + path);
  return Status::Ok();
}

RaggedBatch BatchFrom(const json& spec) {
  RaggedBatch batch;
  const json& ids = spec.at("ids");
  for (size_t s = 0; s < ids.size(); ++s) {
    std::vector<int32_t> seq = ids[s].get<std::vector<int32_t>>();
    std::vector<int32_t> types = spec.contains("types")
                                     ? spec["types"][s].get<std::vector<int32_t>>()
                                     : std::vector<int32_t>(seq.size(), 0);
    batch.Add(seq, types);
  }
  return batch;
}

RaggedBatch SequenceAlone(const RaggedBatch& batch, int s) {
  const int begin = batch.cu_seqlens[s], end = batch.cu_seqlens[s + 1];
  RaggedBatch one;
  one.Add({batch.input_ids.begin() + begin, batch.input_ids.begin() + end},
          {batch.token_type_ids.begin() + begin, batch.token_type_ids.begin() + end});
  return one;
}

StatusOr<std::unique_ptr<Engine>> MakeEngine(std::shared_ptr<const Model> model, const json& c) {
  if (c.value("device", "cuda") == "cpu") return CreateCpuEngine(std::move(model), {});
  CudaEngineOptions o;
  ASSIGN_OR_RETURN(o.precision, ParsePrecision(c.value("precision", "fp16")));
  o.approximate_erf_gelu = c.value("gelu", "exact") == "tanh";
  cuda::Tuning t;
  t.cuda_graphs = c.value("cuda_graphs", true);
  t.overlap_kernel_launches = c.value("pdl", true);
  t.splitk_gemms = c.value("splitk_gemm", true);
  t.fused_gelu_gemm = c.value("fused_gelu_gemm", true);
  t.tma_attention = c.value("tma_attention", true);
  t.attention_windows = c.value("attention_windows", true);
  t.first_query_attention = c.value("first_query_attention", true);
  return cuda::CreateCudaEngine(std::move(model), o, t);
}

Status Main(const json& request) {
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, LoadHfModel(request.at("model")));
  if (request.contains("layers")) {
    const int layers = request["layers"];
    if (layers < 1 || layers > model->config.num_layers)
      return InvalidArgument("layers must be 1.." + std::to_string(model->config.num_layers));
    model->weights.layers.resize(layers);
    model->config.num_layers = layers;
  }
  const std::string out_dir = request.at("out");
  std::vector<std::pair<std::string, RaggedBatch>> batches;
  std::vector<bool> alone;
  for (const json& b : request.at("batches")) {
    batches.emplace_back(b.at("name"), BatchFrom(b));
    alone.push_back(b.value("alone", false));
  }
  json index = json::object();
  for (const json& c : request.at("configs")) {
    const std::string config = c.at("name");
    ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, MakeEngine(model, c));
    const RunOptions options{.last_hidden_state = c.value("hidden_state", false)};
    const int repeats = c.value("repeats", 3);
    for (size_t b = 0; b < batches.size(); ++b) {
      const auto& [name, batch] = batches[b];
      ASSIGN_OR_RETURN(BatchOutputs first, engine->Run(batch, options));
      bool identical = true;
      for (int r = 1; r < repeats; ++r) {
        // The later repeats replay the graph captured after the first.
        engine->WaitForBackgroundWork();
        ASSIGN_OR_RETURN(BatchOutputs again, engine->Run(batch, options));
        for (const NamedOutput& o : first.outputs)
          identical = identical && again.Find(o.name)->data == o.data;
      }
      std::map<std::string, std::vector<float>> alone_data;
      if (alone[b]) {
        for (int s = 0; s < batch.num_seqs(); ++s) {
          ASSIGN_OR_RETURN(BatchOutputs one, engine->Run(SequenceAlone(batch, s), options));
          for (const NamedOutput& o : one.outputs)
            alone_data[o.name].insert(alone_data[o.name].end(), o.data.begin(), o.data.end());
        }
      }
      json& entry = index[config][name];
      entry["identical_repeats"] = identical;
      entry["repeats"] = repeats;
      for (const NamedOutput& o : first.outputs) {
        const std::string stem = out_dir + "/" + config + "." + name + "." + o.name;
        RETURN_IF_ERROR(WriteFloats(stem + ".f32", o.data));
        if (alone[b]) RETURN_IF_ERROR(WriteFloats(stem + ".alone.f32", alone_data[o.name]));
        entry["outputs"][o.name] = {{"width", o.width}, {"per_token", o.per_token}};
      }
    }
    index[config]["_device"] = engine->device();
    std::fprintf(stderr, "parity runner: %s done (%s)\n", config.c_str(), engine->device().c_str());
  }
  std::ofstream(out_dir + "/index.json") << index.dump(1);
  return Status::Ok();
}

}  // namespace
}  // namespace bertrt

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: bertrt_parity_runner REQUEST.json\n"
                 "Runs token-id batches on engines of several configurations and writes their\n"
                 "outputs as float32 files; see tests/gpu/parity.py, which writes the request.\n");
    return argc == 2 ? 0 : 2;
  }
  std::ifstream f(argv[1]);
  nlohmann::json request;
  try {
    request = nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s: %s\n", argv[1], e.what());
    return 2;
  }
  bertrt::Status st = bertrt::Status::Ok();
  try {
    st = bertrt::Main(request);
  } catch (const std::exception& e) {
    st = bertrt::InvalidArgument(std::string("bad request: ") + e.what());
  }
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
