#include "tokenizer/bounded_encoder.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/scratch.h"
#include "tokenizer/utf8.h"

namespace bertrt::tokenizer {

Status NormalizedTooLong(size_t limit) {
  return OutOfRange("the text is too long to tokenize: its normalized form passes " +
                    std::to_string(limit) +
                    " chars before the tokens it needs are found (--max-normalized-chars); "
                    "shorten it, or raise that limit");
}

namespace {

// CheckUtf8's and DecodeText's errors: `bad` the first invalid byte (or -1),
// `chars` the code points.
Status Utf8Errors(bool is_pair, ptrdiff_t bad, size_t chars) {
  const char* name = is_pair ? "text_pair" : "text";
  if (bad >= 0) {
    return InvalidArgument(std::string("invalid UTF-8 in ") + name + " at byte offset " +
                           std::to_string(bad));
  }
  if (chars >= UINT32_MAX / 4) return InvalidArgument(std::string(name) + " is too long");
  return Status::Ok();
}

}  // namespace

Status CheckUtf8(std::string_view text, bool is_pair, size_t& chars) {
  const ptrdiff_t bad = ValidateUtf8(text, chars);
  return Utf8Errors(is_pair, bad, chars);
}

Status DecodeText(std::string_view text, bool is_pair, std::vector<char32_t>& chars) {
  const ptrdiff_t bad = DecodeUtf8(text, chars);
  return Utf8Errors(is_pair, bad, chars.size());
}

namespace {

// Chunks grow to this many raw chars: large enough to cost little per
// chunk, small enough that a chunk past the tokens needed costs little.
constexpr size_t kMaxChunkChars = 64 << 10;

// Split's segments from the text's end. A scan of the text's UTF-8 keeps
// the last `keep_`: of any 1024 segments at least 511 are added tokens (no
// two text segments are adjacent), one token each, so one scan serves any
// model's limit; a reader that wants more (to count) gets a scan that
// keeps four times as many.
class SegmentsFromEnd {
 public:
  SegmentsFromEnd(const AddedTokenMatcher& m, std::string_view text, size_t chars)
      : m_(m), text_(text), chars_(chars) {}

  bool Previous(Utf8Segment& out) {
    if (!scanned_ || (given_ >= kept_.size() && kept_.size() < total_)) {
      if (scanned_) keep_ *= 4;
      Scan();
    }
    if (given_ >= kept_.size()) return false;
    out = kept_[kept_.size() - 1 - given_++];
    return true;
  }

 private:
  void Scan() {
    kept_.clear();
    total_ = 0;
    AddedTokenMatcher::Utf8Scan scan(m_, text_, chars_);
    for (Utf8Segment s; scan.Next(s); ++total_) {
      if (kept_.size() == keep_) kept_.pop_front();
      kept_.push_back(s);
    }
    scanned_ = true;
  }

  const AddedTokenMatcher& m_;
  std::string_view text_;
  size_t chars_;
  size_t keep_ = 1024;
  bool scanned_ = false;
  std::deque<Utf8Segment> kept_;  // the last of the text's `total_` segments
  size_t total_ = 0;
  size_t given_ = 0;  // from the end
};

// One text's tokens piece by piece: from its start, or from its end.
class TextStream {
 public:
  TextStream(const PieceEncoder& enc, std::string_view text, size_t chars, bool backward,
             const BoundedTuning& tuning, size_t max_normalized)
      : enc_(enc),
        text_(text),
        backward_(backward),
        first_chunk_(std::max<size_t>(tuning.first_chunk_chars, 1)),
        max_normalized_(max_normalized),
        forward_segments_(enc.raw_added_tokens(), text, chars),
        backward_segments_(enc.raw_added_tokens(), text, chars) {}

  // The next piece (forward: the one after those given; backward: the one
  // before); false when the text is done.
  StatusOr<bool> Next(Piece& out) {
    while (true) {
      if (in_segment_) {
        ASSIGN_OR_RETURN(const bool got, backward_ ? PieceBackward(out) : PieceForward(out));
        if (got) return true;
        in_segment_ = false;
      }
      Utf8Segment seg;
      if (!(backward_ ? backward_segments_.Previous(seg) : forward_segments_.Next(seg)))
        return false;
      if (seg.id >= 0) {
        enc_.PushAddedToken(seg.id, text_.substr(seg.byte_begin, seg.byte_end - seg.byte_begin),
                            seg.begin, seg.end, out);
        return true;
      }
      RETURN_IF_ERROR(StartSegment(seg));
    }
  }

 private:
  Status StartSegment(const Utf8Segment& seg) {
    seg_ = seg;
    in_segment_ = true;
    step_ = first_chunk_;
    raw_.clear();
    const size_t at_byte = backward_ ? seg.byte_end : seg.byte_begin;
    raw_first_ = backward_ ? seg.end : seg.begin;
    raw_first_byte_ = raw_end_byte_ = at_byte;
    norm_pos_ = raw_first_;
    nb_.chars.clear();
    nb_.align.clear();
    checked_ = backward_ ? 1 : 0;
    front_is_start_ = true;
    return FindStartLag();
  }

  // The normalizer's StartLag for the segment, read from its start as far
  // as it needs (which, for text that starts as usual, is a char).
  Status FindStartLag() {
    std::vector<char32_t> head;
    size_t byte = seg_.byte_begin;
    for (size_t want = 16;; want *= 2) {
      for (; head.size() < want && byte < seg_.byte_end;
           byte += Utf8Length(static_cast<unsigned char>(text_[byte])))
        head.push_back(Utf8CharAt(text_.data(), byte));
      const std::optional<size_t> lag =
          enc_.NormalizerStartLag(head.data(), head.size(), byte == seg_.byte_end);
      if (lag) {
        lag_ = *lag;
        return Status::Ok();
      }
      if (max_normalized_ > 0 && head.size() > max_normalized_)
        return NormalizedTooLong(max_normalized_);
    }
  }

  char32_t Raw(size_t i) const { return raw_[i - raw_first_]; }

  // Decodes the segment's chars up to `end` (exclusive) into the window.
  void ExtendRight(size_t end) {
    end = std::min<size_t>(end, seg_.end);
    while (raw_first_ + raw_.size() < end) {
      raw_.push_back(Utf8CharAt(text_.data(), raw_end_byte_));
      raw_end_byte_ += Utf8Length(static_cast<unsigned char>(text_[raw_end_byte_]));
    }
  }

  // Decodes the segment's chars from `begin` on into the window, a block at
  // a time so that a backward search costs no more than a forward one.
  void ExtendLeft(size_t begin) {
    if (begin >= raw_first_) return;
    const size_t block = std::max<size_t>(256, raw_.size());
    begin =
        std::max<size_t>(seg_.begin, std::min(begin, raw_first_ > block ? raw_first_ - block : 0));
    std::vector<char32_t> more;
    more.reserve(raw_first_ - begin);
    size_t byte = raw_first_byte_;
    for (size_t i = begin; i < raw_first_; ++i) byte = Utf8PreviousChar(text_.data(), byte);
    raw_first_byte_ = byte;
    for (size_t i = begin; i < raw_first_; ++i) {
      more.push_back(Utf8CharAt(text_.data(), byte));
      byte += Utf8Length(static_cast<unsigned char>(text_[byte]));
    }
    raw_.insert(raw_.begin(), more.begin(), more.end());
    raw_first_ = begin;
  }

  bool NormalizerCut(size_t p) const {
    return enc_.NormalizerCutsBefore(Raw(p - 1), Raw(p), p + 1 < seg_.end ? Raw(p + 1) : kTextEnd);
  }

  // Raw chars [begin, end) normalized, counted against the limit (their raw
  // length first, so that a long piece without a cut is refused before it
  // is normalized).
  StatusOr<NormalizedString> NormalizeChunk(size_t begin, size_t end) {
    if (max_normalized_ > 0 && normalized_ + (end - begin) > max_normalized_)
      return NormalizedTooLong(max_normalized_);
    NormalizedString part;
    enc_.Normalize(raw_.data() + (begin - raw_first_), static_cast<uint32_t>(end - begin),
                   static_cast<uint32_t>(begin), part);
    if (begin != seg_.begin) {
      for (Span& a : part.align) {
        a.begin -= static_cast<uint32_t>(lag_);
        a.end -= static_cast<uint32_t>(lag_);
      }
    }
    normalized_ += part.size();
    if (max_normalized_ > 0 && normalized_ > max_normalized_)
      return NormalizedTooLong(max_normalized_);
    return part;
  }

  // The raw chars from norm_pos_ to the first normalizer cut a chunk on,
  // normalized onto the end of nb_.
  Status NormalizeForward() {
    const size_t target = norm_pos_ + step_;
    step_ = std::min(2 * step_, kMaxChunkChars);
    size_t cut = seg_.end;
    for (size_t p = target; p < seg_.end; ++p) {
      if (max_normalized_ > 0 && p - norm_pos_ > max_normalized_)
        return NormalizedTooLong(max_normalized_);
      ExtendRight(p + 2);
      if (NormalizerCut(p)) {
        cut = p;
        break;
      }
    }
    ExtendRight(cut);
    ASSIGN_OR_RETURN(NormalizedString part, NormalizeChunk(norm_pos_, cut));
    nb_.chars.insert(nb_.chars.end(), part.chars.begin(), part.chars.end());
    nb_.align.insert(nb_.align.end(), part.align.begin(), part.align.end());
    norm_pos_ = cut;
    // The char before the next cut is all the left context a rule reads.
    const size_t keep_from = std::max(raw_first_, norm_pos_ - 1);
    raw_.erase(raw_.begin(), raw_.begin() + (keep_from - raw_first_));
    raw_first_ = keep_from;
    return Status::Ok();
  }

  // The raw chars from the last normalizer cut a chunk before norm_pos_,
  // normalized onto the front of nb_.
  Status NormalizeBackward() {
    const size_t target = norm_pos_ - std::min<size_t>(step_, norm_pos_ - seg_.begin);
    step_ = std::min(2 * step_, kMaxChunkChars);
    size_t cut = seg_.begin;
    for (size_t p = target; p > seg_.begin; --p) {
      if (max_normalized_ > 0 && norm_pos_ - p > max_normalized_)
        return NormalizedTooLong(max_normalized_);
      ExtendLeft(p - 1);
      if (NormalizerCut(p)) {
        cut = p;
        break;
      }
    }
    ExtendLeft(cut);
    ASSIGN_OR_RETURN(NormalizedString part, NormalizeChunk(cut, norm_pos_));
    nb_.chars.insert(nb_.chars.begin(), part.chars.begin(), part.chars.end());
    nb_.align.insert(nb_.align.begin(), part.align.begin(), part.align.end());
    checked_ += part.size();
    norm_pos_ = cut;
    // The char after the next cut is all the right context a rule reads.
    raw_.resize(std::min(raw_.size(), norm_pos_ + 2 - raw_first_));
    return Status::Ok();
  }

  // nb_[begin, end) as a string of its own, for the encoder.
  NormalizedString Take(size_t begin, size_t end, bool segment_start) const {
    NormalizedString part;
    part.chars.assign(nb_.chars.begin() + begin, nb_.chars.begin() + end);
    part.align.assign(nb_.align.begin() + begin, nb_.align.begin() + end);
    // A segment's start keeps the origin of the segment it is in the whole
    // (HF's first split), a piece after a cut that of its first char (the
    // pre-tokenizer's split there).
    part.origin = segment_start ? seg_.begin : part.align[0].begin;
    return part;
  }

  // The next piece of the segment from its start: up to the last encoder
  // cut in what is normalized, or the rest at the segment's end.
  StatusOr<bool> PieceForward(Piece& out) {
    while (true) {
      // Positions below checked_ have been ruled out; the last char waits
      // for the char after it.
      for (size_t c = nb_.chars.size() < 2 ? 0 : nb_.chars.size() - 2; c >= 1 && c >= checked_;
           --c) {
        if (enc_.EncoderCutsBefore(nb_.chars.data(), c)) return EncodeFront(c, out);
      }
      checked_ = std::max<size_t>(checked_, nb_.chars.size() < 1 ? 0 : nb_.chars.size() - 1);
      if (norm_pos_ == seg_.end) {
        if (nb_.chars.empty()) return false;
        return EncodeFront(nb_.chars.size(), out);
      }
      RETURN_IF_ERROR(NormalizeForward());
    }
  }

  StatusOr<bool> EncodeFront(size_t c, Piece& out) {
    NormalizedString part = Take(0, c, front_is_start_);
    front_is_start_ = false;
    // The positions after c were ruled out on the way down to it.
    checked_ = c < nb_.chars.size() ? nb_.chars.size() - 1 - c : 0;
    nb_.chars.erase(nb_.chars.begin(), nb_.chars.begin() + c);
    nb_.align.erase(nb_.align.begin(), nb_.align.begin() + c);
    RETURN_IF_ERROR(enc_.EncodeNormalized(std::move(part), out));
    return true;
  }

  // The next piece of the segment from its end: from the first encoder cut
  // in what is normalized, or all of it at the segment's start.
  StatusOr<bool> PieceBackward(Piece& out) {
    while (true) {
      for (size_t c = 1; c + 1 < nb_.chars.size() && c < checked_; ++c) {
        if (enc_.EncoderCutsBefore(nb_.chars.data(), c)) return EncodeBack(c, out);
      }
      checked_ = 1;
      if (norm_pos_ == seg_.begin) {
        if (nb_.chars.empty()) return false;
        return EncodeBack(0, out);
      }
      RETURN_IF_ERROR(NormalizeBackward());
    }
  }

  StatusOr<bool> EncodeBack(size_t c, Piece& out) {
    NormalizedString part = Take(c, nb_.chars.size(), c == 0);
    nb_.chars.resize(c);
    nb_.align.resize(c);
    RETURN_IF_ERROR(enc_.EncodeNormalized(std::move(part), out));
    return true;
  }

  const PieceEncoder& enc_;
  std::string_view text_;
  bool backward_;
  size_t first_chunk_;
  size_t max_normalized_;
  size_t normalized_ = 0;  // chars normalized so far
  AddedTokenMatcher::Utf8Scan forward_segments_;
  SegmentsFromEnd backward_segments_;

  // The text segment being read, and its raw chars [raw_first_, ...) in
  // the window raw_: bytes from raw_first_byte_ (and, forward, to
  // raw_end_byte_).
  bool in_segment_ = false;
  Utf8Segment seg_{};
  size_t lag_ = 0;  // the normalizer's StartLag for the segment
  size_t step_ = 0;
  std::vector<char32_t> raw_;
  size_t raw_first_ = 0;
  size_t raw_first_byte_ = 0;
  size_t raw_end_byte_ = 0;
  // Raw chars before norm_pos_ (forward; from it backward) are normalized
  // and in nb_ unless encoded already. checked_: forward, positions of nb_
  // below it hold no cut; backward, none from it on.
  size_t norm_pos_ = 0;
  NormalizedString nb_;
  size_t checked_ = 0;
  bool front_is_start_ = true;  // forward: nb_ starts where the segment does
};

// A text read through a TextStream as far as a caller needs: the first
// tokens (forward) or the last (backward) kept, the others only counted.
class TextReader {
 public:
  TextReader(const PieceEncoder& enc, std::string_view text, size_t chars, bool backward,
             const BoundedTuning& tuning, size_t max_normalized)
      : stream_(enc, text, chars, backward, tuning, max_normalized), backward_(backward) {}

  size_t count() const { return count_; }
  bool complete() const { return complete_; }

  // Reads until at least `count` tokens are read or the text is done,
  // keeping at most `keep` of them.
  Status ReadUntil(size_t count, size_t keep) {
    while (!complete_ && count_ < count) {
      Piece piece;
      ASSIGN_OR_RETURN(const bool more, stream_.Next(piece));
      if (!more) {
        complete_ = true;
        break;
      }
      const size_t n = piece.tokens.ids.size();
      if (n == 0) continue;
      // The text's first token is the first of the first piece with tokens
      // forward, of the last such piece backward.
      if (backward_ || count_ == 0) first_offsets_ = piece.offsets_if_first;
      count_ += n;
      if (backward_ && kept_ >= keep) {
        // Before what is kept: only its words count.
        for (uint8_t w : piece.tokens.word_starts) words_unkept_ += w;
      }
      if (kept_ < keep) {
        const size_t take = std::min(n, keep - kept_);
        TokenList& t = piece.tokens;
        if (backward_) {  // the piece's last tokens are the text's later ones
          t.DropFront(n - take);
        } else {
          t.Resize(take);
        }
        kept_ += take;
        pieces_.push_back(std::move(piece.tokens));
      }
    }
    return Status::Ok();
  }
  Status ReadAll() { return ReadUntil(SIZE_MAX, SIZE_MAX); }

  // The first (forward) or last (backward) `n` tokens read, n <= kept.
  TokenList Take(size_t n) const {
    TokenList out;
    out.ids.reserve(n);
    out.offsets.reserve(n);
    out.word_starts.reserve(n);
    auto append = [&out](const TokenList& t, size_t take) {
      out.ids.insert(out.ids.end(), t.ids.begin(), t.ids.begin() + take);
      out.offsets.insert(out.offsets.end(), t.offsets.begin(), t.offsets.begin() + take);
      out.word_starts.insert(out.word_starts.end(), t.word_starts.begin(),
                             t.word_starts.begin() + take);
    };
    if (backward_) {
      // The words before what was read are not known: counted from there.
      for (auto it = pieces_.rbegin(); it != pieces_.rend(); ++it) {
        out.words_before += it->words_before;
        append(*it, it->ids.size());
      }
      out.words_before += words_unkept_;
      out.DropFront(out.ids.size() - n);
    } else {
      for (const TokenList& t : pieces_) append(t, std::min(t.ids.size(), n - out.ids.size()));
    }
    // Whether what is kept starts with the text's first token.
    const bool has_first = n > 0 && (!backward_ || (complete_ && n == count_));
    if (has_first && first_offsets_) out.offsets[0] = *first_offsets_;
    return out;
  }

 private:
  TextStream stream_;
  bool backward_;
  std::vector<TokenList> pieces_;  // in reading order
  size_t kept_ = 0;
  size_t count_ = 0;
  size_t words_unkept_ = 0;  // backward: words begun in pieces read past what is kept
  bool complete_ = false;
  std::optional<TokenOffsets> first_offsets_;
};

}  // namespace

// The texts read as far as `limits` needs; the decisions ApplyLimits
// makes, on counts that are exact where they matter.
StatusOr<Encoding> EncodeInPieces(const PieceEncoder& enc, std::string_view text,
                                  std::optional<std::string_view> pair, const EncodeLimits& limits,
                                  EncodeReport* report, const BoundedTuning& tuning) {
  size_t text_chars = 0, pair_chars = 0;
  RETURN_IF_ERROR(CheckUtf8(text, false, text_chars));
  if (pair) RETURN_IF_ERROR(CheckUtf8(*pair, true, pair_chars));
  const PostProcessor& post = enc.post_processor();
  const size_t specials = post.AddedTokens(pair.has_value());
  const size_t max_length = limits.max_length;
  const bool backward = limits.truncate && limits.truncate_left;
  TextReader a(enc, text, text_chars, backward, tuning, limits.max_normalized_chars);
  std::optional<TextReader> b;
  if (pair) b.emplace(enc, *pair, pair_chars, backward, tuning, limits.max_normalized_chars);
  auto b_count = [&] { return b ? b->count() : 0; };
  auto all_read = [&] { return a.complete() && (!b || b->complete()); };
  KeptLengths kept{0, 0};
  if (max_length == 0 || (limits.truncate && max_length < specials)) {
    // No limit; HF does not truncate below the special tokens either.
    RETURN_IF_ERROR(a.ReadAll());
    if (b) RETURN_IF_ERROR(b->ReadAll());
    kept = {a.count(), b_count()};
  } else if (!limits.truncate) {
    if (max_length < specials) return TooManyTokens(report, specials, false, max_length);
    const size_t budget = max_length - specials;
    RETURN_IF_ERROR(a.ReadUntil(budget + 1, budget));
    if (b && a.count() <= budget) {
      RETURN_IF_ERROR(b->ReadUntil(budget - a.count() + 1, budget - a.count()));
    }
    if (a.count() + b_count() > budget)
      return TooManyTokens(report, a.count() + b_count() + specials, all_read(), max_length);
    kept = {a.count(), b_count()};
  } else {
    const size_t budget = max_length - specials;
    // Each text's count is exact when it fits the budget and known to pass
    // it otherwise: TruncatedLengths needs no more, but to tell which of
    // two texts over the budget is the longer when the odd token goes to it.
    if (budget > 0) {
      RETURN_IF_ERROR(a.ReadUntil(budget + 1, budget));
      if (b) RETURN_IF_ERROR(b->ReadUntil(budget + 1, budget));
    }
    if (b && budget % 2 == 1 && limits.truncation == Truncation::kLongestFirst && !a.complete() &&
        !b->complete()) {
      while (!a.complete() && !b->complete()) {
        RETURN_IF_ERROR(a.ReadUntil(a.count() + 1, 0));
        RETURN_IF_ERROR(b->ReadUntil(b->count() + 1, 0));
      }
      if (a.complete()) {
        RETURN_IF_ERROR(b->ReadUntil(a.count() + 1, 0));
      } else {
        RETURN_IF_ERROR(a.ReadUntil(b->count() + 1, 0));
      }
    }
    std::optional<size_t> b_len;
    if (b) b_len = b->count();
    auto lengths = TruncatedLengths(a.count(), b_len, specials, max_length, limits.truncation);
    if (!lengths.ok() && b && !all_read()) {
      // The exact counts TruncatedLengths names are not known.
      const bool first = limits.truncation == Truncation::kOnlyFirst;
      return InvalidArgument("cannot truncate to max_length " + std::to_string(max_length) +
                             " with " + TruncationName(limits.truncation) + ": the " +
                             (first ? "second" : "first") + " text alone has the " +
                             std::to_string(budget) +
                             " tokens or more that max_length leaves after the special tokens; "
                             "raise max_length or use longest_first");
    }
    ASSIGN_OR_RETURN(kept, std::move(lengths));
    if (report && backward && limits.count_first_text_cut_up_to > 0) {
      RETURN_IF_ERROR(a.ReadUntil(kept.a + limits.count_first_text_cut_up_to, 0));
      report->first_text_cut = std::min(a.count() - kept.a, limits.count_first_text_cut_up_to);
    }
  }
  // A reader stops once it has more tokens than it keeps: fewer read means
  // all. With no room for any, whether there were any is read here.
  if (report && limits.truncate && kept.a == 0 && kept.b == 0) {
    RETURN_IF_ERROR(a.ReadUntil(1, 0));
    if (b) RETURN_IF_ERROR(b->ReadUntil(1, 0));
  }
  if (report) report->truncated = a.count() > kept.a || b_count() > kept.b;
  TokenList a_tokens = a.Take(kept.a);
  TokenList b_tokens;
  if (b) b_tokens = b->Take(kept.b);
  Encoding out;
  post.Apply(a_tokens, b ? &b_tokens : nullptr, out);
  return out;
}

StatusOr<Encoding> EncodeWithin(const PieceEncoder& encoder, std::string_view text,
                                std::optional<std::string_view> text_pair,
                                const EncodeLimits& limits, EncodeReport* report,
                                const BoundedTuning& tuning) {
  const size_t bytes = text.size() + (text_pair ? text_pair->size() : 0);
  if (!ReadInPieces(bytes, tuning)) return encoder.EncodeWhole(text, text_pair, limits, report);
  return EncodeInPieces(encoder, text, text_pair, limits, report, tuning);
}

}  // namespace bertrt::tokenizer
