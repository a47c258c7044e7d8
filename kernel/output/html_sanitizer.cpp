#include "kernel/output/html_sanitizer.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>

namespace belljar {

namespace {

using Names = std::unordered_set<std::string_view>;

// What tables, text formatting and plots need. Nothing here runs code, loads a document or
// submits anything; the URL-bearing attributes are checked by kind below.
const Names kHtmlElements = {
    "a",        "abbr",       "address", "article", "aside",  "b",    "bdi",    "bdo",
    "big",      "blockquote", "br",      "caption", "center", "cite", "code",   "col",
    "colgroup", "dd",         "del",     "details", "dfn",    "div",  "dl",     "dt",
    "em",       "figcaption", "figure",  "footer",  "h1",     "h2",   "h3",     "h4",
    "h5",       "h6",         "header",  "hr",      "i",      "img",  "ins",    "kbd",
    "li",       "mark",       "ol",      "p",       "pre",    "q",    "rp",     "rt",
    "ruby",     "s",          "samp",    "section", "small",  "span", "strike", "strong",
    "sub",      "summary",    "sup",     "table",   "tbody",  "td",   "tfoot",  "th",
    "thead",    "time",       "tr",      "tt",      "u",      "ul",   "var",    "wbr",
    "style"};
// SVG without scripts, animations (which can set href), foreignObject, filters or <title>/<desc>
// (HTML integration points).
const Names kSvgElements = {
    "svg",    "g",        "defs",    "path",    "rect",           "circle",         "ellipse",
    "line",   "polyline", "polygon", "text",    "tspan",          "clippath",       "use",
    "symbol", "marker",   "mask",    "pattern", "lineargradient", "radialgradient", "stop",
    "image"};
// Never rendered: dropped whole without a finding.
const Names kSilentlyDropped = {"metadata"};
// Disallowed elements whose content is dropped with them (in strip mode).
const Names kDroppedWithContent = {
    "script",   "template", "noscript", "iframe",        "frame",
    "frameset", "noembed",  "noframes", "xmp",           "textarea",
    "title",    "object",   "applet",   "math",          "foreignobject",
    "select",   "head",     "animate",  "animatemotion", "animatetransform",
    "set",      "desc",     "video",    "audio",         "canvas"};
// Raw text in HTML: the content is not markup and ends only at the matching end tag.
const Names kRawText = {"script",   "style",    "xmp",      "iframe", "noembed",
                        "noframes", "noscript", "textarea", "title"};
constexpr size_t kMaxDepth = 256;
const Names kVoid = {"area",   "base", "br",   "col",   "embed",  "hr",    "img", "input",
                     "keygen", "link", "meta", "param", "source", "track", "wbr"};

enum class AttrKind { plain, link, resource, fragment, css, namespace_uri };

const std::unordered_map<std::string_view, AttrKind>& attribute_kinds() {
  static const std::unordered_map<std::string_view, AttrKind> kinds = [] {
    std::unordered_map<std::string_view, AttrKind> k;
    for (std::string_view name : {"class",
                                  "id",
                                  "title",
                                  "dir",
                                  "lang",
                                  "align",
                                  "valign",
                                  "width",
                                  "height",
                                  "border",
                                  "cellpadding",
                                  "cellspacing",
                                  "colspan",
                                  "rowspan",
                                  "span",
                                  "scope",
                                  "headers",
                                  "abbr",
                                  "summary",
                                  "bgcolor",
                                  "nowrap",
                                  "scoped",
                                  "type",
                                  "alt",
                                  "start",
                                  "reversed",
                                  "datetime",
                                  "open",
                                  "role",
                                  "version",
                                  "viewbox",
                                  "preserveaspectratio",
                                  "x",
                                  "y",
                                  "x1",
                                  "y1",
                                  "x2",
                                  "y2",
                                  "cx",
                                  "cy",
                                  "r",
                                  "rx",
                                  "ry",
                                  "d",
                                  "points",
                                  "transform",
                                  "fill-opacity",
                                  "fill-rule",
                                  "stroke-width",
                                  "stroke-linecap",
                                  "stroke-linejoin",
                                  "stroke-dasharray",
                                  "stroke-dashoffset",
                                  "stroke-opacity",
                                  "stroke-miterlimit",
                                  "opacity",
                                  "clip-rule",
                                  "clippathunits",
                                  "markerwidth",
                                  "markerheight",
                                  "markerunits",
                                  "refx",
                                  "refy",
                                  "orient",
                                  "font-family",
                                  "font-size",
                                  "font-weight",
                                  "font-style",
                                  "text-anchor",
                                  "dominant-baseline",
                                  "alignment-baseline",
                                  "baseline-shift",
                                  "letter-spacing",
                                  "word-spacing",
                                  "dx",
                                  "dy",
                                  "rotate",
                                  "textlength",
                                  "lengthadjust",
                                  "gradientunits",
                                  "gradienttransform",
                                  "offset",
                                  "stop-color",
                                  "stop-opacity",
                                  "spreadmethod",
                                  "fx",
                                  "fy",
                                  "patternunits",
                                  "patterncontentunits",
                                  "patterntransform",
                                  "maskunits",
                                  "maskcontentunits",
                                  "visibility",
                                  "display",
                                  "color",
                                  "overflow",
                                  "vector-effect",
                                  "shape-rendering",
                                  "text-rendering",
                                  "image-rendering",
                                  "xml:space",
                                  "text-decoration",
                                  "writing-mode"})
      k.emplace(name, AttrKind::plain);
    for (std::string_view name : {"style", "fill", "stroke", "clip-path", "mask", "marker-start",
                                  "marker-mid", "marker-end", "filter"})
      k.emplace(name, AttrKind::css);
    k.emplace("href", AttrKind::link);  // narrowed by element in attribute_kind()
    k.emplace("xlink:href", AttrKind::link);
    k.emplace("src", AttrKind::resource);
    k.emplace("xmlns", AttrKind::namespace_uri);
    k.emplace("xmlns:xlink", AttrKind::namespace_uri);
    return k;
  }();
  return kinds;
}

const std::unordered_map<std::string_view, std::string_view>& named_entities() {
  static const std::unordered_map<std::string_view, std::string_view> entities = {
      {"amp", "&"},        {"lt", "<"},          {"gt", ">"},          {"quot", "\""},
      {"apos", "'"},       {"nbsp", "\u00a0"},   {"copy", "\u00a9"},   {"reg", "\u00ae"},
      {"times", "\u00d7"}, {"divide", "\u00f7"}, {"middot", "\u00b7"}, {"hellip", "\u2026"},
      {"mdash", "\u2014"}, {"ndash", "\u2013"},  {"laquo", "\u00ab"},  {"raquo", "\u00bb"},
      {"deg", "\u00b0"},   {"plusmn", "\u00b1"}, {"micro", "\u00b5"},  {"para", "\u00b6"},
      {"sect", "\u00a7"},  {"bull", "\u2022"},   {"euro", "\u20ac"},   {"pound", "\u00a3"},
      {"yen", "\u00a5"},   {"cent", "\u00a2"},   {"trade", "\u2122"},  {"larr", "\u2190"},
      {"rarr", "\u2192"},  {"uarr", "\u2191"},   {"darr", "\u2193"},   {"le", "\u2264"},
      {"ge", "\u2265"},    {"ne", "\u2260"},     {"minus", "\u2212"},  {"infin", "\u221e"}};
  return entities;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool starts_with_ci(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && lower(text.substr(0, prefix.size())) == prefix;
}

// needle in lower case, starting with a character that has no case ('<').
size_t find_ci(std::string_view text, std::string_view needle, size_t from) {
  for (size_t at = text.find(needle[0], from); at != std::string_view::npos;
       at = text.find(needle[0], at + 1))
    if (starts_with_ci(text.substr(at), needle)) return at;
  return std::string_view::npos;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Character references decoded as a browser would for the forms it always honours (numeric
// with or without ';', the named ones above with ';'). Anything else stays literal text, and
// is re-serialized escaped, so the browser shows it literally: never a character we didn't see.
std::string decode_entities(std::string_view text, bool* unknown_named = nullptr) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '&') {
      out += text[i++];
      continue;
    }
    size_t j = i + 1;
    if (j < text.size() && text[j] == '#') {
      ++j;
      bool hex = j < text.size() && (text[j] == 'x' || text[j] == 'X');
      if (hex) ++j;
      size_t digits_start = j;
      uint64_t cp = 0;
      while (j < text.size() &&
             (hex ? std::isxdigit(static_cast<unsigned char>(text[j])) : is_digit(text[j]))) {
        char c = text[j];
        uint64_t digit = is_digit(c) ? uint64_t(c - '0') : uint64_t((c | 0x20) - 'a' + 10);
        cp = std::min<uint64_t>(cp * (hex ? 16 : 10) + digit, 0x110000);
        ++j;
      }
      if (j == digits_start) {
        out += text[i++];
        continue;
      }
      if (j < text.size() && text[j] == ';') ++j;
      append_utf8(out, static_cast<uint32_t>(cp));
      i = j;
      continue;
    }
    while (j < text.size() && (is_alpha(text[j]) || is_digit(text[j])) && j - i < 32) ++j;
    if (j < text.size() && text[j] == ';') {
      auto it = named_entities().find(text.substr(i + 1, j - i - 1));
      if (it != named_entities().end()) {
        out += it->second;
        i = j + 1;
        continue;
      }
      if (unknown_named && j > i + 1) *unknown_named = true;
    }
    out += text[i++];
  }
  return out;
}

void escape_into(std::string& out, std::string_view text, bool attribute) {
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        if (attribute)
          out += "&quot;";
        else
          out += c;
        break;
      case '\'':
        if (attribute)
          out += "&#39;";
        else
          out += c;
        break;
      default:
        out += c;
    }
  }
}

// The URL as the browser's URL parser sees it: tab, CR and LF anywhere removed, C0 controls
// and spaces trimmed at both ends; lower-cased for the scheme test. nullopt: a control inside.
std::optional<std::string> normalized_url(std::string_view url) {
  std::string out;
  for (char c : url)
    if (c != '\t' && c != '\n' && c != '\r') out += c;
  auto trim = [](char c) { return static_cast<unsigned char>(c) <= 0x20; };
  while (!out.empty() && trim(out.front())) out.erase(out.begin());
  while (!out.empty() && trim(out.back())) out.pop_back();
  for (char c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
  return lower(out);
}

bool is_data_image(std::string_view url) {
  for (std::string_view prefix :
       {"data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp"})
    if (url.substr(0, prefix.size()) == prefix && url.size() > prefix.size() &&
        (url[prefix.size()] == ';' || url[prefix.size()] == ','))
      return true;
  return false;
}

const std::array<std::string_view, 9> kTexActiveMacros = {"\\href",   "\\require", "\\class",
                                                          "\\cssId",  "\\style",   "\\unicode",
                                                          "\\toggle", "\\mathtip", "\\texttip"};

// The CSS of a <style>, each rule made to apply inside `.scope` only; nullopt when its shape is
// not one we can scope: the complete list of what passes is rules (a selector list and a block
// of declarations without nested blocks) and @media/@supports blocks of such rules, to a depth
// of 4. Every other at-rule (@keyframes and @font-face names are page-wide; @layer, @property,
// @scope, @container, @page ...) and any nesting is refused, so the output goes isolated.
// A selector S becomes `.scope :is(S)`: whatever S says about ancestors or siblings (:has(),
// :root, combinators), the element styled is a descendant of the output's box. A pseudo-element
// (not allowed inside :is()) is kept after it.
class CssScoper {
 public:
  CssScoper(std::string_view css, std::string_view scope) : css_(css), scope_(scope) {}

  std::optional<std::string> run() {
    std::string out;
    if (!read_alike(css_) || !rules(out, 0) || at_ != css_.size()) return std::nullopt;
    return out;
  }

 private:
  // Whether the browser's tokens and this reader's brackets agree: an escape (`\)` is part of
  // a name, not a bracket), a comment (what it holds is not read at all) and an unquoted url(...)
  // (one token, whatever brackets or quotes it holds) are where they would not, so CSS with one
  // is not scoped (the output goes isolated). The outside red team's third pass: `url(#[[)`
  // counted as two open brackets left a selector list outside :is(...).
  static bool read_alike(std::string_view css) {
    if (css.find('\\') != std::string_view::npos || css.find("/*") != std::string_view::npos)
      return false;
    std::string folded = lower(css);
    for (size_t at = folded.find("url("); at != std::string::npos;
         at = folded.find("url(", at + 4)) {
      size_t p = at + 4;
      while (p < folded.size() && is_space(folded[p])) ++p;
      if (p < folded.size() && (folded[p] == '"' || folded[p] == '\'')) continue;  // a function
      size_t close = folded.find(')', p);
      if (close == std::string::npos) return false;
      if (folded.substr(p, close - p).find_first_of("([]{}\"'\n\r\f") != std::string::npos)
        return false;
    }
    return true;
  }

  void skip_space() {
    while (at_ < css_.size() && is_space(css_[at_])) ++at_;
  }

  // From at_ to the first of `stops` outside strings, brackets and parentheses; false at the
  // end of the input, on an unbalanced bracket, or on a string a line break ends (browsers
  // read the rest differently).
  bool read_until(std::string_view stops, std::string& into) {
    int depth = 0;
    for (; at_ < css_.size(); ++at_) {
      char c = css_[at_];
      if (c == '"' || c == '\'') {
        size_t close = at_ + 1;
        while (close < css_.size() && css_[close] != c && css_[close] != '\n' &&
               css_[close] != '\r' && css_[close] != '\f')
          ++close;
        if (close >= css_.size() || css_[close] != c) return false;
        into.append(css_.substr(at_, close - at_ + 1));
        at_ = close;
        continue;
      }
      if (depth == 0 && stops.find(c) != std::string_view::npos) return true;
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') {
        if (--depth < 0) return false;
      }
      if (c == '{' || c == '}' || c == ';') {
        if (depth > 0) return false;  // a block can't open or close inside brackets
      }
      into += c;
    }
    return false;
  }

  bool rules(std::string& out, int depth) {
    for (;;) {
      skip_space();
      if (at_ >= css_.size() || css_[at_] == '}') return depth > 0 ? at_ < css_.size() : true;
      if (css_[at_] == '@') {
        std::string prelude;
        if (!read_until("{;}", prelude) || css_[at_] != '{') return false;
        std::string name = lower(prelude.substr(0, prelude.find_first_of(" \t\r\n\f(")));
        if ((name != "@media" && name != "@supports") || depth >= 4) return false;
        ++at_;
        out += prelude + "{";
        if (!rules(out, depth + 1) || at_ >= css_.size() || css_[at_] != '}') return false;
        ++at_;
        out += "}";
        continue;
      }
      std::string selectors, declarations;
      if (!read_until("{;}", selectors) || css_[at_] != '{') return false;
      ++at_;
      if (!read_until("{}", declarations) || css_[at_] != '}') return false;
      ++at_;
      auto scoped = scoped_selectors(selectors);
      if (!scoped) return false;
      out += *scoped + "{" + declarations + "}";
    }
  }

  std::optional<std::string> scoped_selectors(const std::string& list) {
    std::string out;
    size_t start = 0;
    int depth = 0;
    char quote = 0;
    for (size_t i = 0; i <= list.size(); ++i) {
      char c = i < list.size() ? list[i] : ',';
      if (quote) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '"' || c == '\'') quote = c;
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (c != ',' || depth != 0) continue;
      std::string selector = trimmed(list.substr(start, i - start));
      start = i + 1;
      if (selector.empty()) return std::nullopt;
      std::string pseudo;
      if (size_t at = outermost_pseudo_element(selector); at != std::string::npos) {
        pseudo = selector.substr(at);
        selector = trimmed(selector.substr(0, at));
        if (selector.empty()) selector = "*";
        // Only a name and its argument: no combinator or list may follow it out of :is().
        if (!std::all_of(pseudo.begin(), pseudo.end(), [](char c) {
              return is_alpha(c) || is_digit(c) || c == ':' || c == '-' || c == '_' || c == '(' ||
                     c == ')';
            }))
          return std::nullopt;
      }
      out += (out.empty() ? "" : ", ") + ("." + std::string(scope_) + " :is(" + selector + ")") +
             pseudo;
    }
    return out;
  }

  // Where "::" starts outside brackets and strings (one inside :not(...) is its argument's).
  static size_t outermost_pseudo_element(const std::string& selector) {
    int depth = 0;
    char quote = 0;
    for (size_t i = 0; i + 1 < selector.size(); ++i) {
      char c = selector[i];
      if (quote) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '(' || c == '[') {
        ++depth;
      } else if (c == ')' || c == ']') {
        --depth;
      } else if (depth == 0 && c == ':' && selector[i + 1] == ':') {
        return i;
      }
    }
    return std::string::npos;
  }

  static std::string trimmed(std::string_view text) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return std::string(text);
  }

  std::string_view css_;
  std::string_view scope_;
  size_t at_ = 0;
};

class MarkupReader {
 public:
  MarkupReader(std::string_view in, MarkupKind kind, bool break_tex, std::string_view scope)
      : in_(in), kind_(kind), break_tex_(break_tex), scope_(scope) {}

  MarkupVerdict run() {
    while (pos_ < in_.size()) {
      size_t lt = in_.find('<', pos_);
      text(in_.substr(pos_, lt == std::string_view::npos ? std::string_view::npos : lt - pos_));
      if (lt == std::string_view::npos) break;
      pos_ = lt;
      char next = pos_ + 1 < in_.size() ? in_[pos_ + 1] : '\0';
      if (is_alpha(next)) {
        start_tag();
      } else if (next == '/') {
        if (pos_ + 2 < in_.size() && is_alpha(in_[pos_ + 2]))
          end_tag();
        else
          skip_declaration("a malformed end tag", ">");
      } else if (next == '!') {
        std::string_view rest = in_.substr(pos_);
        if (rest.substr(0, 4) == "<!--")
          comment();
        else if (starts_with_ci(rest, "<!doctype") && !seen_content_)
          doctype();
        else if (rest.substr(0, 9) == "<![CDATA[")
          skip_declaration("a CDATA section", "]]>");
        else
          skip_declaration("a <! declaration", ">");
      } else if (next == '?') {
        // Only an XML declaration, first in an SVG document; it is not forwarded.
        size_t close = in_.find('>', pos_);
        bool prolog = !seen_content_ && kind_ == MarkupKind::svg &&
                      in_.substr(pos_, 6) == "<?xml " && close != std::string_view::npos &&
                      in_[close - 1] == '?';
        skip_declaration(prolog ? std::string_view() : std::string_view("a processing instruction"),
                         ">");
      } else {
        text(in_.substr(pos_, 1));  // a literal '<', as browsers read it
        ++pos_;
      }
    }
    while (!stack_.empty()) pop();
    if (!tex_is_inert(all_text_)) finding("a MathJax link or extension macro (href, require, ...)");
    MarkupVerdict verdict;
    verdict.inert = findings_.empty();
    verdict.findings = std::move(findings_);
    verdict.canonical = std::move(out_);
    verdict.styled = styled_;
    verdict.has_style = has_style_;
    return verdict;
  }

 private:
  struct Open {
    std::string name;     // lower case
    std::string spelled;  // as written, for SVG's case-sensitive names
    bool emitted;         // its start tag is in the output
    bool dropped;         // it and its content are left out
    bool svg;             // inside <svg>: foreign content
    bool scoped = false;  // an SVG document's root: its content is in <g class=scope>
  };

  bool dropping() const { return !stack_.empty() && stack_.back().dropped; }
  bool in_svg() const { return !stack_.empty() && stack_.back().svg; }

  void finding(std::string what) {
    if (std::find(findings_.begin(), findings_.end(), what) == findings_.end() &&
        findings_.size() < 8)
      findings_.push_back(std::move(what));
  }

  void text(std::string_view raw) {
    if (raw.empty()) return;
    if (raw.find_first_not_of(" \t\r\n\f") != std::string_view::npos) seen_content_ = true;
    if (dropping()) return;
    std::string decoded = decode_entities(raw);
    all_text_ += decoded;
    if (break_tex_) {
      // Strip mode with a MathJax macro somewhere: no backslash in text may start a macro.
      std::string broken;
      for (char c : decoded) {
        broken += c;
        if (c == '\\') broken += "\u200b";
      }
      decoded = std::move(broken);
    }
    escape_into(out_, decoded, false);
  }

  void skip_declaration(std::string_view what, std::string_view terminator) {
    if (!what.empty()) finding(std::string(what));
    size_t end = in_.find(terminator, pos_ + 2);
    if (end == std::string_view::npos) {
      finding("an unterminated declaration");
      pos_ = in_.size();
    } else {
      pos_ = end + terminator.size();
    }
  }

  void doctype() {
    // Not forwarded. An internal subset (entity definitions) is read differently by XML and
    // HTML parsers: never inert.
    size_t close = in_.find('>', pos_);
    std::string_view declaration =
        in_.substr(pos_, close == std::string_view::npos ? close : close - pos_);
    if (declaration.find('[') != std::string_view::npos)
      skip_declaration("a DOCTYPE with an internal subset", "]>");
    else
      skip_declaration({}, ">");
  }

  void comment() {
    // Only the shape every parser reads alike: "<!--", text without "--" or a leading '>'
    // or "->", then "-->". Comments are never forwarded.
    std::string_view body = in_.substr(pos_ + 4);
    size_t end = body.find("--");
    bool abrupt = body.substr(0, 1) == ">" || body.substr(0, 2) == "->";
    if (abrupt || end == std::string_view::npos || body.substr(end, 3) != "-->") {
      finding("a malformed comment");
      size_t close = abrupt ? body.find('>') : body.find("-->");
      pos_ = close == std::string_view::npos ? in_.size() : pos_ + 4 + close + (abrupt ? 1 : 3);
      return;
    }
    pos_ += 4 + end + 3;
  }

  static bool valid_name(std::string_view name, bool attribute) {
    if (name.empty() || name.size() > 64) return false;
    if (!is_alpha(name[0]) && !(attribute && (name[0] == '_' || name[0] == ':'))) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return is_alpha(c) || is_digit(c) || c == '-' || c == '_' || c == ':' || c == '.';
    });
  }

  struct Attribute {
    std::string spelled, name, value;
  };

  // Reads "<name attr=value ...>" from pos_; false when the input ends inside the tag.
  bool read_tag(std::string& spelled, std::vector<Attribute>& attributes, bool& self_closing) {
    size_t p = pos_ + 1;
    while (p < in_.size() && in_[p] == '/') ++p;
    size_t start = p;
    while (p < in_.size() && !is_space(in_[p]) && in_[p] != '/' && in_[p] != '>') ++p;
    spelled = std::string(in_.substr(start, p - start));
    self_closing = false;
    for (;;) {
      while (p < in_.size() && (is_space(in_[p]) || in_[p] == '/')) {
        self_closing = in_[p] == '/' && p + 1 < in_.size() && in_[p + 1] == '>';
        ++p;
      }
      if (p >= in_.size()) return false;
      if (in_[p] == '>') {
        pos_ = p + 1;
        return true;
      }
      self_closing = false;
      size_t name_start = p++;
      while (p < in_.size() && !is_space(in_[p]) && in_[p] != '/' && in_[p] != '>' && in_[p] != '=')
        ++p;
      Attribute attribute{std::string(in_.substr(name_start, p - name_start)), "", ""};
      attribute.name = lower(attribute.spelled);
      size_t q = p;
      while (q < in_.size() && is_space(in_[q])) ++q;
      if (q < in_.size() && in_[q] == '=') {
        p = q + 1;
        while (p < in_.size() && is_space(in_[p])) ++p;
        if (p >= in_.size()) return false;
        if (in_[p] == '"' || in_[p] == '\'') {
          size_t close = in_.find(in_[p], p + 1);
          if (close == std::string_view::npos) return false;
          attribute.value = decode_entities(in_.substr(p + 1, close - p - 1));
          p = close + 1;
        } else {
          size_t value_start = p;
          while (p < in_.size() && !is_space(in_[p]) && in_[p] != '>') ++p;
          std::string_view raw = in_.substr(value_start, p - value_start);
          if (raw.find_first_of("\"'<=`") != std::string_view::npos)
            finding("an odd unquoted attribute value");
          attribute.value = decode_entities(raw);
        }
      }
      attributes.push_back(std::move(attribute));
    }
  }

  std::optional<AttrKind> attribute_kind(const std::string& element, const std::string& attribute) {
    auto it = attribute_kinds().find(attribute);
    if (it == attribute_kinds().end()) return std::nullopt;
    if (it->second == AttrKind::link && element != "a")
      return element == "image" ? AttrKind::resource : AttrKind::fragment;
    if (it->second == AttrKind::resource && element != "img") return std::nullopt;
    return it->second;
  }

  // The attributes that may stay, serialized; findings for the others.
  std::string checked_attributes(const std::string& element,
                                 const std::vector<Attribute>& attributes) {
    std::string out;
    Names seen;
    for (auto& a : attributes) {
      if (!valid_name(a.name, true)) {
        finding("an odd attribute name");
        continue;
      }
      if (seen.count(a.name)) continue;  // browsers keep the first
      seen.insert(a.name);
      if (a.name.rfind("on", 0) == 0) {
        finding(a.name + "= (an event handler)");
        continue;
      }
      auto kind = attribute_kind(element, a.name);
      if (!kind && a.name.rfind("aria-", 0) == 0) kind = AttrKind::plain;
      if (!kind) {
        finding(a.name + "= on <" + element + ">");
        continue;
      }
      bool ok = true;
      switch (*kind) {
        case AttrKind::plain:
          break;
        case AttrKind::link:
          ok = link_url_is_inert(a.value);
          break;
        case AttrKind::resource:
          ok = resource_url_is_inert(a.value);
          break;
        case AttrKind::fragment: {
          auto url = normalized_url(a.value);
          ok = url && !url->empty() && (*url)[0] == '#';
          break;
        }
        case AttrKind::css:
          ok = css_is_inert(a.value);
          break;
        case AttrKind::namespace_uri:
          ok = a.value ==
               (a.name == "xmlns" ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xlink");
          break;
      }
      if (!ok) {
        // Never the value itself: findings are shown in the page, where MathJax reads text.
        finding(a.name + "= with a URL, CSS or namespace that is not allowed");
        continue;
      }
      out += ' ';
      out += a.spelled;
      out += "=\"";
      escape_into(out, a.value, true);
      out += '"';
    }
    return out;
  }

  void pop() {
    Open open = std::move(stack_.back());
    stack_.pop_back();
    if (open.scoped) out_ += "</g>";
    if (open.emitted) out_ += "</" + open.spelled + ">";
  }

  void push(std::string name, std::string spelled, bool emitted, bool dropped) {
    bool svg = in_svg() || name == "svg";
    stack_.push_back({std::move(name), std::move(spelled), emitted, dropped || dropping(), svg});
  }

  // The content of a raw-text element: everything to its end tag, which is consumed too.
  std::string_view take_raw_text(const std::string& name) {
    size_t end = pos_;
    for (;;) {
      end = find_ci(in_, "</" + name, end);
      if (end == std::string::npos) {
        finding("an unterminated <" + name + ">");
        std::string_view content = in_.substr(pos_);
        pos_ = in_.size();
        return content;
      }
      size_t after = end + 2 + name.size();
      if (after >= in_.size() || is_space(in_[after]) || in_[after] == '/' || in_[after] == '>')
        break;
      end = after;
    }
    std::string_view content = in_.substr(pos_, end - pos_);
    size_t close = in_.find('>', end);
    pos_ = close == std::string_view::npos ? in_.size() : close + 1;
    return content;
  }

  void start_tag() {
    std::string spelled;
    std::vector<Attribute> attributes;
    bool self_closing = false;
    seen_content_ = true;
    if (!read_tag(spelled, attributes, self_closing)) {
      finding("an unterminated tag");
      pos_ = in_.size();
      return;
    }
    std::string name = lower(spelled);
    if (stack_.size() >= kMaxDepth) {
      // Bounded work and memory for the supervisor; the element is left out.
      finding("markup nested deeper than 256 elements");
      return;
    }
    bool void_element = kVoid.count(name) > 0;
    bool empty = void_element || (self_closing && in_svg());
    if (!valid_name(name, false)) {
      finding("an odd tag name");
      return;
    }
    if (dropping()) {
      if (kRawText.count(name) && !in_svg())
        take_raw_text(name);
      else if (!empty)
        push(name, spelled, false, true);
      return;
    }
    if (kSilentlyDropped.count(name)) {
      if (!empty) push(name, spelled, false, true);
      return;
    }
    if (name == "plaintext") {
      finding("<plaintext>");
      pos_ = in_.size();
      return;
    }
    bool allowed = kHtmlElements.count(name) || kSvgElements.count(name);
    if (!allowed) {
      finding("<" + name + ">");
      if (kRawText.count(name) && !in_svg())
        take_raw_text(name);
      else if (!empty)
        push(name, spelled, false, kDroppedWithContent.count(name) > 0);
      return;
    }
    if (name == "style") {
      style(spelled, attributes);
      return;
    }
    // An SVG document's root is where Notebook 6 puts it, in the page, with no box of ours
    // around it: a style there (position: fixed) would reach past the output.
    bool document_root = kind_ == MarkupKind::svg && stack_.empty();
    // Only an <svg> root is foreign content there: a <g> root would be an unknown HTML element
    // and an <svg> inside it a box of the page (the outside red team's third pass).
    if (document_root && name != "svg") {
      finding("an SVG document whose root is not <svg>");
      return;
    }
    if (document_root && std::any_of(attributes.begin(), attributes.end(),
                                     [](const auto& a) { return lower(a.name) == "style"; })) {
      finding("a style on an SVG document's root");
      return;
    }
    std::string kept_attributes = checked_attributes(name, attributes);
    if (!kept_attributes.empty() || name == "svg") styled_ = true;
    out_ += "<" + spelled + kept_attributes;
    if (void_element) {
      out_ += "/>";
    } else if (empty) {
      out_ += "></" + spelled + ">";
    } else {
      out_ += ">";
      push(name, spelled, true, false);
      if (document_root && !scope_.empty()) {
        // Its <style> rules apply inside the scope only (CssScoper), so the content is put in
        // an element of that class: drawn as an <img> or put into the page, it looks the same.
        out_ += "<g class=\"" + std::string(scope_) + "\">";
        stack_.back().scoped = true;
      }
    }
  }

  // <style>: raw text in HTML, ordinary text in SVG. With no '<' and no '&' in it both read
  // the same, so the CSS checked is the CSS applied, whatever the namespace.
  void style(const std::string& spelled, const std::vector<Attribute>& attributes) {
    std::string_view css = take_raw_text("style");
    if (css.find_first_of("<&") != std::string_view::npos || !css_is_inert(css)) {
      finding("a <style> with markup or CSS that loads or runs something");
      return;
    }
    std::optional<std::string> kept(css);
    if (!scope_.empty()) kept = CssScoper(css, scope_).run();
    if (!kept) {
      finding("a <style> whose rules can't be kept to this output (an at-rule, nesting)");
      return;
    }
    styled_ = true;
    has_style_ = true;
    out_ += "<" + spelled + checked_attributes("style", attributes) + ">";
    out_ += *kept;
    out_ += "</" + spelled + ">";
  }

  void end_tag() {
    std::string spelled;
    std::vector<Attribute> ignored;
    bool self_closing = false;
    if (!read_tag(spelled, ignored, self_closing)) {
      finding("an unterminated end tag");
      pos_ = in_.size();
      return;
    }
    std::string name = lower(spelled);
    for (size_t i = stack_.size(); i-- > 0;) {
      if (stack_[i].name != name) continue;
      while (stack_.size() > i) pop();
      return;
    }
    // A stray end tag: nothing to close, and nothing forwarded.
  }

  std::string_view in_;
  MarkupKind kind_;
  bool break_tex_;
  std::string_view scope_;  // the output's box: <style> rules apply inside it only
  bool styled_ = false;     // MarkupVerdict::styled
  bool has_style_ = false;
  size_t pos_ = 0;
  bool seen_content_ = false;
  std::vector<Open> stack_;
  std::string out_, all_text_;
  std::vector<std::string> findings_;
};

}  // namespace

bool link_url_is_inert(std::string_view url) {
  auto normal = normalized_url(url);
  if (!normal) return false;
  const std::string& u = *normal;
  if (!u.empty() && u[0] == '#') return true;
  for (std::string_view scheme : {"https://", "http://", "mailto:"})
    if (u.rfind(scheme, 0) == 0) return true;
  return is_data_image(u);
}

bool resource_url_is_inert(std::string_view url) {
  auto normal = normalized_url(url);
  return normal && is_data_image(*normal);
}

bool css_is_inert(std::string_view css) {
  for (char c : css)
    if (c == '\\' || c == '<' || c == '&' || (static_cast<unsigned char>(c) < 0x20 && !is_space(c)))
      return false;
  // No comments: one reader could see a keyword split by one that another reads whole.
  std::string text = lower(css);
  if (text.find("/*") != std::string::npos) return false;
  for (std::string_view bad :
       {"@import", "expression", "javascript:", "vbscript:", "behavior", "-moz-binding",
        "image-set(", "image(", "element(", "src(", "@font-face", "@namespace"})
    if (text.find(bad) != std::string::npos) return false;
  for (size_t at = text.find("url("); at != std::string::npos; at = text.find("url(", at + 4)) {
    size_t v = at + 4;
    while (v < text.size() && is_space(text[v])) ++v;
    if (v < text.size() && (text[v] == '"' || text[v] == '\'')) ++v;
    std::string_view rest = std::string_view(text).substr(v);
    if (!(rest.substr(0, 1) == "#" || is_data_image(rest))) return false;
  }
  return true;
}

std::string decode_character_references(std::string_view text, bool* unknown_named) {
  return decode_entities(text, unknown_named);
}

bool tex_is_inert(std::string_view text) {
  for (std::string_view macro : kTexActiveMacros)
    if (text.find(macro) != std::string_view::npos) return false;
  return true;
}

MarkupVerdict check_markup(std::string_view markup, MarkupKind kind, std::string_view scope) {
  // NUL is replaced or dropped differently by each parser state: never forwarded.
  std::string without_nul;
  bool had_nul = markup.find('\0') != std::string_view::npos;
  if (had_nul) {
    without_nul.assign(markup);
    without_nul.erase(std::remove(without_nul.begin(), without_nul.end(), '\0'), without_nul.end());
    markup = without_nul;
  }
  MarkupVerdict verdict = MarkupReader(markup, kind, false, scope).run();
  bool tex =
      std::any_of(verdict.findings.begin(), verdict.findings.end(),
                  [](const std::string& f) { return f.find("MathJax") != std::string::npos; });
  if (tex) verdict.canonical = MarkupReader(markup, kind, true, scope).run().canonical;
  if (had_nul) {
    verdict.findings.insert(verdict.findings.begin(), "a NUL character");
    verdict.inert = false;
  }
  return verdict;
}

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  escape_into(out, text, true);
  return out;
}

std::string style_scope() {
  static std::mt19937_64 bits{std::random_device{}()};
  static std::mutex lock;
  std::lock_guard held(lock);
  char name[32];
  std::snprintf(name, sizeof name, "belljar-s%016llx", static_cast<unsigned long long>(bits()));
  return name;
}

std::string contained_markup(const std::string& canonical, const std::string& scope) {
  // contain: paint makes the box the containing block of fixed and absolute descendants, a
  // stacking context and a clip; overflow: auto keeps a wide table scrollable inside it.
  return "<div class=\"" + scope + "\" style=\"contain:paint;isolation:isolate;overflow:auto\">" +
         canonical + "</div>";
}

}  // namespace belljar
