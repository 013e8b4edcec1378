#include "checkpoint/torch_pickle.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

namespace bertrt::checkpoint {
namespace {

// Values live in one arena and refer to each other by index: a hostile pickle
// can nest lists a million deep or make a list contain itself, and neither
// may turn into recursion (destructors, shared_ptr cycles) here.
enum class Kind { kNone, kBool, kInt, kBigInt, kFloat, kString, kTuple, kList, kDict, kGlobal,
                  kStorage, kTensor };

struct Value {
  Kind kind = Kind::kNone;
  int64_t i = 0;    // kInt, kBool; kStorage: index into storages; kTensor: into recipes
  double f = 0;     // kFloat
  std::string s;    // kString; kGlobal "module.name"; kBigInt bytes
  std::vector<size_t> items;                     // kTuple, kList
  std::vector<std::pair<size_t, size_t>> pairs;  // kDict
  int64_t view_offset = 0, view_numel = 0;       // kStorage: the part of the storage it is
};

// The storage types a state dict names, and their element types.
bool StorageDType(const std::string& global, DType* out) {
  static const std::pair<const char*, DType> kTypes[] = {
      {"torch.FloatStorage", DType::kF32},   {"torch.HalfStorage", DType::kF16},
      {"torch.BFloat16Storage", DType::kBF16}, {"torch.DoubleStorage", DType::kF64},
      {"torch.LongStorage", DType::kI64},    {"torch.IntStorage", DType::kI32},
      {"torch.ShortStorage", DType::kI16},   {"torch.CharStorage", DType::kI8},
      {"torch.ByteStorage", DType::kU8},     {"torch.BoolStorage", DType::kBool}};
  for (const auto& [name, dtype] : kTypes)
    if (global == name) {
      *out = dtype;
      return true;
    }
  return false;
}

constexpr const char* kOrderedDict = "collections.OrderedDict";
constexpr const char* kRebuildTensorV2 = "torch._utils._rebuild_tensor_v2";
constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor";
constexpr const char* kRebuildParameter = "torch._utils._rebuild_parameter";
constexpr const char* kRebuildParameterWithState = "torch._utils._rebuild_parameter_with_state";
constexpr size_t kMaxRank = 16;

class Machine {
 public:
  Machine(std::string_view bytes, std::string where, bool torch)
      : in_(bytes), where_(std::move(where)), torch_(torch) {}

  // Runs to STOP; the value left on the stack is `root`.
  Status Run() {
    for (;;) {
      if (pos_ >= in_.size()) return Bad("ends before the pickle's STOP opcode");
      const uint8_t op = static_cast<uint8_t>(in_[pos_++]);
      Status st = Step(op);
      if (!st.ok()) return st;
      if (op == '.') return Status::Ok();
    }
  }

  size_t consumed() const { return pos_; }
  size_t root() const { return root_; }
  const Value& at(size_t i) const { return values_[i]; }
  std::vector<TorchTensorRecipe>& recipes() { return recipes_; }
  std::vector<TorchStorageRef>& storages() { return storages_; }

  Status Bad(const std::string& what) const {
    return DataLoss(where_ + ": pickle byte " + std::to_string(pos_) + ": " + what);
  }

 private:
  std::string_view in_;
  std::string where_;
  bool torch_;
  size_t pos_ = 0;
  std::vector<Value> values_;
  std::vector<size_t> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, size_t> memo_;
  std::vector<TorchTensorRecipe> recipes_;
  std::vector<TorchStorageRef> storages_;
  std::map<std::string, size_t> storage_index_;
  size_t root_ = 0;

  size_t Make(Value v) {
    values_.push_back(std::move(v));
    return values_.size() - 1;
  }
  size_t MakeKind(Kind k) {
    Value v;
    v.kind = k;
    return Make(std::move(v));
  }
  void Push(size_t v) { stack_.push_back(v); }

  Status Need(size_t n) const {
    if (in_.size() - pos_ < n) return Bad("ends inside an opcode's argument");
    return Status::Ok();
  }
  uint64_t ReadLE(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  Status Pop(size_t* v) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Bad("pops an empty stack");
    *v = stack_.back();
    stack_.pop_back();
    return Status::Ok();
  }
  Status Top(size_t* v) const {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() <= floor) return Bad("reads an empty stack");
    *v = stack_.back();
    return Status::Ok();
  }
  // The values above the last MARK, which is removed.
  Status PopMark(std::vector<size_t>* out) {
    if (marks_.empty()) return Bad("needs a MARK that is not there");
    const size_t m = marks_.back();
    marks_.pop_back();
    out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return Status::Ok();
  }
  Status PushString(size_t n, Kind kind = Kind::kString) {
    RETURN_IF_ERROR(Need(n));
    Value v;
    v.kind = kind;
    v.s.assign(in_.data() + pos_, n);
    pos_ += n;
    Push(Make(std::move(v)));
    return Status::Ok();
  }
  Status PushInt(int64_t i) {
    Value v;
    v.kind = Kind::kInt;
    v.i = i;
    Push(Make(std::move(v)));
    return Status::Ok();
  }
  Status PushTuple(std::vector<size_t> items) {
    Value v;
    v.kind = Kind::kTuple;
    v.items = std::move(items);
    Push(Make(std::move(v)));
    return Status::Ok();
  }
  Status Memo(uint64_t key) {
    size_t v = 0;
    RETURN_IF_ERROR(Top(&v));
    memo_[key] = v;
    return Status::Ok();
  }
  Status Get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return Bad("reads memo entry " + std::to_string(key) + ", never stored");
    Push(it->second);
    return Status::Ok();
  }
  Status SetItems(size_t dict, const std::vector<size_t>& kv) {
    if (values_[dict].kind != Kind::kDict) return Bad("sets items of something not a dict");
    if (kv.size() % 2) return Bad("sets items from an odd number of values");
    for (size_t k = 0; k < kv.size(); k += 2) values_[dict].pairs.emplace_back(kv[k], kv[k + 1]);
    return Status::Ok();
  }
  Status Appends(size_t list, const std::vector<size_t>& items) {
    if (values_[list].kind != Kind::kList) return Bad("appends to something not a list");
    values_[list].items.insert(values_[list].items.end(), items.begin(), items.end());
    return Status::Ok();
  }

  Status Global(std::string module, std::string name) {
    const std::string full = module + "." + name;
    DType unused;
    const bool known = full == kOrderedDict || full == kRebuildTensorV2 || full == kRebuildTensor ||
                       full == kRebuildParameter || full == kRebuildParameterWithState ||
                       StorageDType(full, &unused);
    if (!torch_ || !known)
      return Status(StatusCode::kUnimplemented,
                    where_ + ": the pickle names " + full.substr(0, 200) +
                        ", which a state dict saved by torch.save never does; bertrt reads "
                        "state dicts only and runs nothing from a pickle, so it refused the "
                        "file (save the weights with safetensors, or torch.save(model."
                        "state_dict()))");
    Value v;
    v.kind = Kind::kGlobal;
    v.s = full;
    Push(Make(std::move(v)));
    return Status::Ok();
  }

  Status AsInt(size_t v, const char* what, int64_t* out) const {
    if (values_[v].kind != Kind::kInt && values_[v].kind != Kind::kBool)
      return Bad(std::string(what) + " is not an integer");
    *out = values_[v].i;
    return Status::Ok();
  }
  Status IntTuple(size_t v, const char* what, std::vector<int64_t>* out) const {
    const Value& t = values_[v];
    if (t.kind != Kind::kTuple && t.kind != Kind::kList) return Bad(std::string(what) + " is not a tuple");
    if (t.items.size() > kMaxRank) return Bad(std::string(what) + " has more than 16 dimensions");
    out->clear();
    for (size_t item : t.items) {
      int64_t x = 0;
      RETURN_IF_ERROR(AsInt(item, what, &x));
      if (x < 0) return Bad(std::string(what) + " has a negative entry");
      out->push_back(x);
    }
    return Status::Ok();
  }

  // persistent_load: ('storage', torch.XStorage, key, location, numel[, view]).
  Status PersistentLoad(size_t pid) {
    const Value& t = values_[pid];
    if (!torch_) return Bad("has a persistent id outside the state dict");
    if (t.kind != Kind::kTuple || t.items.size() < 5 || values_[t.items[0]].kind != Kind::kString ||
        values_[t.items[0]].s != "storage")
      return Bad("has a persistent id that is not ('storage', type, key, location, size)");
    const Value& type = values_[t.items[1]];
    const Value& key = values_[t.items[2]];
    DType dtype;
    if (type.kind != Kind::kGlobal || !StorageDType(type.s, &dtype))
      return Bad("names a storage whose type is not one of torch's storage types");
    if (key.kind != Kind::kString) return Bad("names a storage whose key is not a string");
    int64_t numel = 0;
    RETURN_IF_ERROR(AsInt(t.items[4], "a storage's size", &numel));
    if (numel < 0) return Bad("names a storage of negative size");
    auto [it, inserted] = storage_index_.emplace(key.s, storages_.size());
    if (inserted) {
      storages_.push_back({key.s, dtype, numel});
    } else if (storages_[it->second].dtype != dtype || storages_[it->second].numel != numel) {
      return Bad("names storage \"" + key.s.substr(0, 64) + "\" twice with different types or sizes");
    }
    Value v;
    v.kind = Kind::kStorage;
    v.i = static_cast<int64_t>(it->second);
    v.view_numel = numel;
    // The legacy format's storage views: (view key, offset, size) of the root.
    if (t.items.size() > 5 && values_[t.items[5]].kind != Kind::kNone) {
      const Value& view = values_[t.items[5]];
      if (view.kind != Kind::kTuple || view.items.size() != 3)
        return Bad("has a storage view that is not (key, offset, size)");
      int64_t off = 0, n = 0;
      RETURN_IF_ERROR(AsInt(view.items[1], "a storage view's offset", &off));
      RETURN_IF_ERROR(AsInt(view.items[2], "a storage view's size", &n));
      if (off < 0 || n < 0 || off > numel || n > numel - off)
        return Bad("has a storage view outside its storage");
      v.view_offset = off;
      v.view_numel = n;
    }
    Push(Make(std::move(v)));
    return Status::Ok();
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...).
  Status RebuildTensor(const std::vector<size_t>& args) {
    if (args.size() < 4) return Bad("rebuilds a tensor from fewer than 4 arguments");
    const Value& storage = values_[args[0]];
    if (storage.kind != Kind::kStorage) return Bad("rebuilds a tensor from something not a storage");
    TorchTensorRecipe r;
    r.storage = storages_[static_cast<size_t>(storage.i)];
    RETURN_IF_ERROR(AsInt(args[1], "a tensor's storage offset", &r.offset));
    RETURN_IF_ERROR(IntTuple(args[2], "a tensor's size", &r.size));
    RETURN_IF_ERROR(IntTuple(args[3], "a tensor's stride", &r.stride));
    if (r.size.size() != r.stride.size()) return Bad("a tensor's size and stride differ in rank");
    if (r.offset < 0) return Bad("a tensor's storage offset is negative");
    // The last element it reaches must lie inside its view of the storage.
    int64_t last = r.offset, numel = 1;
    bool empty = false;
    for (size_t d = 0; d < r.size.size(); ++d) {
      if (r.size[d] == 0) empty = true;
      int64_t reach;
      if (__builtin_mul_overflow(r.size[d], numel, &numel))
        return Bad("a tensor's size overflows");
      if (r.size[d] > 0 && (__builtin_mul_overflow(r.size[d] - 1, r.stride[d], &reach) ||
                            __builtin_add_overflow(last, reach, &last)))
        return Bad("a tensor's strides overflow");
    }
    if (!empty && last >= storage.view_numel)
      return Bad("a tensor reaches element " + std::to_string(last) + " of a storage of " +
                 std::to_string(storage.view_numel));
    r.offset += storage.view_offset;
    recipes_.push_back(std::move(r));
    Value v;
    v.kind = Kind::kTensor;
    v.i = static_cast<int64_t>(recipes_.size() - 1);
    Push(Make(std::move(v)));
    return Status::Ok();
  }

  Status Reduce() {
    size_t args_v = 0, fn_v = 0;
    RETURN_IF_ERROR(Pop(&args_v));
    RETURN_IF_ERROR(Pop(&fn_v));
    const Value& fn = values_[fn_v];
    if (fn.kind != Kind::kGlobal) return Bad("calls something that is not a global");
    if (values_[args_v].kind != Kind::kTuple) return Bad("calls " + fn.s + " without a tuple of arguments");
    const std::vector<size_t> args = values_[args_v].items;
    if (fn.s == kOrderedDict) {
      if (!args.empty()) return Bad("builds an OrderedDict from arguments");
      Push(MakeKind(Kind::kDict));
      return Status::Ok();
    }
    if (fn.s == kRebuildTensorV2 || fn.s == kRebuildTensor) return RebuildTensor(args);
    if (fn.s == kRebuildParameter || fn.s == kRebuildParameterWithState) {
      if (args.empty() || values_[args[0]].kind != Kind::kTensor)
        return Bad("rebuilds a parameter from something not a tensor");
      Push(args[0]);  // a Parameter's data is the tensor
      return Status::Ok();
    }
    return Bad("calls " + fn.s + ", which is not a function");
  }

  Status Step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        RETURN_IF_ERROR(Need(1));
        if (static_cast<uint8_t>(in_[pos_]) > 5) return Bad("uses pickle protocol above 5");
        ++pos_;
        return Status::Ok();
      case 0x95:  // FRAME: a length hint only
        RETURN_IF_ERROR(Need(8));
        pos_ += 8;
        return Status::Ok();
      case '.': {  // STOP
        if (!marks_.empty()) return Bad("stops with a MARK still open");
        return Pop(&root_);
      }
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return Status::Ok();
      case '0': {  // POP
        size_t v = 0;
        return Pop(&v);
      }
      case '1': {  // POP_MARK
        std::vector<size_t> dropped;
        return PopMark(&dropped);
      }
      case '2': {  // DUP
        size_t v = 0;
        RETURN_IF_ERROR(Top(&v));
        Push(v);
        return Status::Ok();
      }
      case 'N':
        Push(MakeKind(Kind::kNone));
        return Status::Ok();
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        Value v;
        v.kind = Kind::kBool;
        v.i = op == 0x88;
        Push(Make(std::move(v)));
        return Status::Ok();
      }
      case 'J':  // BININT
        RETURN_IF_ERROR(Need(4));
        return PushInt(static_cast<int32_t>(ReadLE(4)));
      case 'K':  // BININT1
        RETURN_IF_ERROR(Need(1));
        return PushInt(static_cast<int64_t>(ReadLE(1)));
      case 'M':  // BININT2
        RETURN_IF_ERROR(Need(2));
        return PushInt(static_cast<int64_t>(ReadLE(2)));
      case 0x8a: {  // LONG1: n bytes, little-endian two's complement
        RETURN_IF_ERROR(Need(1));
        const size_t n = ReadLE(1);
        RETURN_IF_ERROR(Need(n));
        if (n > 8) return PushString(n, Kind::kBigInt);
        uint64_t u = ReadLE(n);
        if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign
        return PushInt(static_cast<int64_t>(u));
      }
      case 'G': {  // BINFLOAT: big-endian double
        RETURN_IF_ERROR(Need(8));
        uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(in_[pos_ + k]);
        pos_ += 8;
        Value v;
        v.kind = Kind::kFloat;
        std::memcpy(&v.f, &u, 8);
        Push(Make(std::move(v)));
        return Status::Ok();
      }
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING
      case 'B':  // BINBYTES
        RETURN_IF_ERROR(Need(4));
        return PushString(ReadLE(4));
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
      case 'C':   // SHORT_BINBYTES
        RETURN_IF_ERROR(Need(1));
        return PushString(ReadLE(1));
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
        RETURN_IF_ERROR(Need(8));
        return PushString(ReadLE(8));
      case ')':
        return PushTuple({});
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84u;
        const size_t floor = marks_.empty() ? 0 : marks_.back();
        if (stack_.size() < floor + n) return Bad("builds a tuple from too few values");
        std::vector<size_t> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        return PushTuple(std::move(items));
      }
      case 't': {  // TUPLE
        std::vector<size_t> items;
        RETURN_IF_ERROR(PopMark(&items));
        return PushTuple(std::move(items));
      }
      case ']':
        Push(MakeKind(Kind::kList));
        return Status::Ok();
      case 'l': {  // LIST
        std::vector<size_t> items;
        RETURN_IF_ERROR(PopMark(&items));
        const size_t list = MakeKind(Kind::kList);
        values_[list].items = std::move(items);
        Push(list);
        return Status::Ok();
      }
      case 'a': {  // APPEND
        size_t item = 0, list = 0;
        RETURN_IF_ERROR(Pop(&item));
        RETURN_IF_ERROR(Top(&list));
        return Appends(list, {item});
      }
      case 'e': {  // APPENDS
        std::vector<size_t> items;
        RETURN_IF_ERROR(PopMark(&items));
        size_t list = 0;
        RETURN_IF_ERROR(Top(&list));
        return Appends(list, items);
      }
      case '}':
        Push(MakeKind(Kind::kDict));
        return Status::Ok();
      case 'd': {  // DICT
        std::vector<size_t> kv;
        RETURN_IF_ERROR(PopMark(&kv));
        const size_t dict = MakeKind(Kind::kDict);
        Push(dict);
        return SetItems(dict, kv);
      }
      case 's': {  // SETITEM
        size_t k = 0, v = 0, dict = 0;
        RETURN_IF_ERROR(Pop(&v));
        RETURN_IF_ERROR(Pop(&k));
        RETURN_IF_ERROR(Top(&dict));
        return SetItems(dict, {k, v});
      }
      case 'u': {  // SETITEMS
        std::vector<size_t> kv;
        RETURN_IF_ERROR(PopMark(&kv));
        size_t dict = 0;
        RETURN_IF_ERROR(Top(&dict));
        return SetItems(dict, kv);
      }
      case 'c': {  // GLOBAL "module\nname\n"
        std::string parts[2];
        for (std::string& part : parts) {
          const size_t nl = in_.find('\n', pos_);
          if (nl == std::string_view::npos || nl - pos_ > 256) return Bad("has a GLOBAL without its name");
          part.assign(in_.data() + pos_, nl - pos_);
          pos_ = nl + 1;
        }
        return Global(parts[0], parts[1]);
      }
      case 0x93: {  // STACK_GLOBAL
        size_t name = 0, module = 0;
        RETURN_IF_ERROR(Pop(&name));
        RETURN_IF_ERROR(Pop(&module));
        if (values_[name].kind != Kind::kString || values_[module].kind != Kind::kString)
          return Bad("has a STACK_GLOBAL whose names are not strings");
        return Global(values_[module].s, values_[name].s);
      }
      case 'R':
        return Reduce();
      case 'b': {  // BUILD: an OrderedDict's attributes (a state dict's _metadata)
        size_t state = 0, obj = 0;
        RETURN_IF_ERROR(Pop(&state));
        RETURN_IF_ERROR(Top(&obj));
        if (values_[obj].kind != Kind::kDict) return Bad("sets the state of something not a dict");
        return Status::Ok();
      }
      case 'Q': {  // BINPERSID
        size_t pid = 0;
        RETURN_IF_ERROR(Pop(&pid));
        return PersistentLoad(pid);
      }
      case 'q':
        RETURN_IF_ERROR(Need(1));
        return Memo(ReadLE(1));
      case 'r':
        RETURN_IF_ERROR(Need(4));
        return Memo(ReadLE(4));
      case 0x94:  // MEMOIZE
        return Memo(memo_.size());
      case 'h':
        RETURN_IF_ERROR(Need(1));
        return Get(ReadLE(1));
      case 'j':
        RETURN_IF_ERROR(Need(4));
        return Get(ReadLE(4));
      case 'i':
      case 'o':
      case 0x81:
      case 0x92:
        return Status(StatusCode::kUnimplemented,
                      where_ + ": the pickle instantiates a class (opcode " +
                          std::to_string(op) + "), which a state dict never does; refused");
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return Bad(std::string("uses opcode ") + hex +
                   ", which torch.save of a state dict does not write");
      }
    }
  }
};

Status ToScalar(const Machine& m, size_t v, int depth, PickleScalar* out) {
  if (depth > 32) return m.Bad("nests deeper than 32 levels");
  const Value& val = m.at(v);
  using K = PickleScalar::Kind;
  switch (val.kind) {
    case Kind::kNone: out->kind = K::kNone; return Status::Ok();
    case Kind::kBool: out->kind = K::kBool; out->i = val.i; return Status::Ok();
    case Kind::kInt: out->kind = K::kInt; out->i = val.i; return Status::Ok();
    case Kind::kBigInt: out->kind = K::kBigInt; out->s = val.s; return Status::Ok();
    case Kind::kFloat: out->kind = K::kFloat; out->f = val.f; return Status::Ok();
    case Kind::kString: out->kind = K::kString; out->s = val.s; return Status::Ok();
    case Kind::kTuple:
    case Kind::kList:
      out->kind = K::kList;
      for (size_t item : val.items)
        RETURN_IF_ERROR(ToScalar(m, item, depth + 1, &out->items.emplace_back()));
      return Status::Ok();
    case Kind::kDict:
      out->kind = K::kDict;
      for (const auto& [k, x] : val.pairs) {
        RETURN_IF_ERROR(ToScalar(m, k, depth + 1, &out->keys.emplace_back()));
        RETURN_IF_ERROR(ToScalar(m, x, depth + 1, &out->values.emplace_back()));
      }
      return Status::Ok();
    default:
      return m.Bad("holds an object where plain data was expected");
  }
}

// The dict of tensors: the root, or the root's "state_dict"/"model"/"module".
const Value* FindStateDict(const Machine& m, const Value& root) {
  if (root.kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : root.pairs)
    if (m.at(v).kind == Kind::kTensor) return &root;
  for (const char* wrapper : {"state_dict", "model", "module"})
    for (const auto& [k, v] : root.pairs)
      if (m.at(k).kind == Kind::kString && m.at(k).s == wrapper && m.at(v).kind == Kind::kDict)
        return &m.at(v);
  return &root;
}

}  // namespace

StatusOr<TorchStateDict> ReadTorchStateDictPickle(std::string_view bytes, const std::string& where,
                                                  size_t* consumed) {
  Machine m(bytes, where, /*torch=*/true);
  RETURN_IF_ERROR(m.Run());
  if (consumed) *consumed = m.consumed();
  const Value* dict = FindStateDict(m, m.at(m.root()));
  if (!dict)
    return InvalidArgument(where + ": holds no state dict (a dict of tensors); save the model with "
                           "torch.save(model.state_dict(), path)");
  TorchStateDict out;
  for (const auto& [k, v] : dict->pairs) {
    if (m.at(v).kind != Kind::kTensor) continue;  // e.g. a training script's epoch counter
    if (m.at(k).kind != Kind::kString) return m.Bad("names a tensor with something not a string");
    TorchTensorRecipe r = m.recipes()[static_cast<size_t>(m.at(v).i)];
    r.name = m.at(k).s;
    out.tensors.push_back(std::move(r));
  }
  out.storages = std::move(m.storages());
  return out;
}

StatusOr<PickleScalar> ReadPlainPickle(std::string_view bytes, const std::string& where,
                                       size_t* consumed) {
  Machine m(bytes, where, /*torch=*/false);
  RETURN_IF_ERROR(m.Run());
  *consumed = m.consumed();
  PickleScalar out;
  RETURN_IF_ERROR(ToScalar(m, m.root(), 0, &out));
  return out;
}

}  // namespace bertrt::checkpoint
