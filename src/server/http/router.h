// The HTTP front end's route table: which handler a method and a path name,
// and the path's parameters ({model}, {version}). A path is split once into
// segments and compared with each route's pattern segment by segment, in time
// linear in the path: std::regex's backtracking matcher recursed once per
// character, and a 40,000-byte model name overflowed the stack before the
// API key was even checked (issue 44, D1). Kept apart from the connections so
// that its unit test and fuzz target reach it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bertrt::server {

// A request target longer than this is refused (414) before routing; no route
// needs more (model names and versions are a few dozen bytes).
inline constexpr size_t kMaxTargetBytes = 8 << 10;

// The parameters of a matched path, in pattern order: {"model", "x"}, ...
class RouteParams {
 public:
  // The parameter's value, or "" where the route has none of that name (the
  // routes without /versions/{version}: the latest version).
  const std::string& operator[](std::string_view name) const {
    static const std::string kNone;
    for (const auto& [key, value] : values_)
      if (key == name) return value;
    return kNone;
  }
  void Add(std::string name, std::string value) {
    values_.emplace_back(std::move(name), std::move(value));
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

template <class Target>
class Router {
 public:
  // `pattern`: "/"-separated segments, each a literal or a {name} that
  // matches any non-empty segment. A trailing "/" is a segment of its own
  // (empty), so "/models/{model}" and "/models/{model}/" are two patterns.
  void Add(std::string method, std::string_view pattern, Target target) {
    std::vector<std::string> segments;
    for (std::string_view s : Split(pattern)) segments.emplace_back(s);
    routes_.push_back({std::move(method), std::move(segments), std::move(target)});
  }

  struct Match {
    const Target* target = nullptr;  // null: no route for this method and path
    RouteParams params;
    // With no target: the methods that have a route for the path, for a 405's
    // Allow header ("" when none: a 404).
    std::string allow;
  };

  // HEAD is looked up as GET (the connection leaves the body out).
  Match Find(std::string_view method, std::string_view path) const {
    Match m;
    // Only origin-form targets name a route ("*", "http://host/..." do not).
    if (path.empty() || path.front() != '/') return m;
    if (method == "HEAD") method = "GET";
    const std::vector<std::string_view> segments = Split(path);
    for (const Route& route : routes_) {
      if (!Matches(route.segments, segments)) continue;
      if (route.method == method) {
        m.target = &route.target;
        Bind(route.segments, segments, m.params);
        return m;
      }
      if (m.allow.find(route.method) == std::string::npos)
        m.allow += (m.allow.empty() ? "" : ", ") + route.method;
    }
    if (m.allow.find("GET") != std::string::npos) m.allow += ", HEAD";
    return m;
  }

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Target target;
  };

  // Views into `path`, which starts with "/" (yielding no segment).
  static std::vector<std::string_view> Split(std::string_view path) {
    std::vector<std::string_view> out;
    if (!path.empty() && path.front() == '/') path.remove_prefix(1);
    while (true) {
      const size_t slash = path.find('/');
      out.push_back(path.substr(0, slash));
      if (slash == std::string_view::npos) break;
      path.remove_prefix(slash + 1);
    }
    return out;
  }

  static bool IsParameter(std::string_view s) {
    return s.size() > 2 && s.front() == '{' && s.back() == '}';
  }

  static bool Matches(const std::vector<std::string>& pattern,
                      const std::vector<std::string_view>& path) {
    if (pattern.size() != path.size()) return false;
    for (size_t i = 0; i < pattern.size(); ++i)
      if (IsParameter(pattern[i]) ? path[i].empty() : pattern[i] != path[i]) return false;
    return true;
  }

  static void Bind(const std::vector<std::string>& pattern,
                   const std::vector<std::string_view>& path, RouteParams& params) {
    for (size_t i = 0; i < pattern.size(); ++i)
      if (IsParameter(pattern[i]))
        params.Add(pattern[i].substr(1, pattern[i].size() - 2), std::string(path[i]));
  }

  std::vector<Route> routes_;
};

}  // namespace bertrt::server
