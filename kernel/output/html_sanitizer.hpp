#pragma once
// The checker for HTML and SVG that the worker displays (text/html, image/svg+xml).
//
// Threat: a notebook frontend inserts HTML from an output into its own page, where a script,
// an event handler or a javascript: URL runs with the notebook server's authority (its API,
// its terminals: a shell on the host). The worker is the attacker, so its markup is read here,
// in the supervisor, token by token against allowlists of elements, attributes, URL schemes and
// CSS. What passes is re-serialized from those tokens (lower-case or original-case names from
// the allowlist, quoted and escaped attribute values, escaped text, no comments), so the browser
// parses exactly what was checked: a parser differential (mXSS, comment and CDATA tricks) can't
// turn checked markup into something else. Anything not provably inert is reported as active.
//
// What is inert here: the markup of tables (pandas DataFrame and Styler HTML), text formatting,
// images from data:image/(png|jpeg|gif|webp) URLs, links to http(s)/mailto/#fragment, and the
// SVG elements and attributes plots use (matplotlib's SVG). <style> (in HTML or SVG) holds CSS
// with no '<', '&', '\\', comments, @import, expression(), javascript:, behavior or -moz-binding,
// and url() only to #fragments and data:image/*. Text may not hold MathJax macros that make links
// or load extensions (\href, \require, ...): notebook frontends typeset text in outputs.
#include <string>
#include <string_view>
#include <vector>

namespace belljar {

enum class MarkupKind {
  html,
  svg
};  // svg: a standalone image/svg+xml document (XML prolog allowed)

struct MarkupVerdict {
  bool inert = false;
  std::vector<std::string>
      findings;           // what was active, first few, in words ("<script>", "onerror=")
  std::string canonical;  // re-serialized: the whole markup, or its inert remainder
};

MarkupVerdict check_markup(std::string_view markup, MarkupKind kind);

// The URL rules for a link (href) and for an embedded resource (src): both refuse every scheme
// but the listed ones, relative URLs (they name the notebook server itself) included.
bool link_url_is_inert(std::string_view url);      // #frag, http(s):, mailto:, data:image/*
bool resource_url_is_inert(std::string_view url);  // data:image/(png|jpeg|gif|webp)
bool css_is_inert(std::string_view css);
// Character references decoded as browsers always decode them (numeric; a few named ones);
// others stay literal. unknown_named: set when a named reference was left undecoded.
std::string decode_character_references(std::string_view text, bool* unknown_named = nullptr);
// MathJax macros that make links, run actions or load extensions in typeset text.
bool tex_is_inert(std::string_view text);
// Text made safe for an element or a quoted attribute: & < > " ' as references.
std::string escape_html(std::string_view text);

}  // namespace belljar
