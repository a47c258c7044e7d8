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
// image-set(), src(), and url() only to #fragments and data:image/*. Text may not hold MathJax
// macros that make links or load extensions (\href, \require, ...): notebook frontends typeset text
// in outputs.
//
// Page-wide CSS: HTML goes into the page as it is, so a <style> there restyles the page (hides
// belljar's notices, relabels the toolbar) and a positioned element covers it. Given a scope, the
// rules of every <style> are rewritten to apply inside the output's own box, and the box
// contains its paint (contained_markup).
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
  // It can be styled beyond what the page gives each kind of element: a <style>, an attribute
  // (class, id, style, SVG's presentation), an <svg>. Then it goes in its box (contained_markup).
  bool styled = false;
  bool has_style = false;  // it keeps a <style> element (an SVG document is scoped only then)
};

// scope: a class name unique to the output (style_scope()). Given, every <style> rule is
// rewritten to apply inside an element of that class only, and a <style> whose shape can't be
// scoped (an at-rule but @media/@supports, nesting) makes the markup active; the caller puts
// the canonical markup in that element (contained_markup()). Without, CSS is kept as it is.
MarkupVerdict check_markup(std::string_view markup, MarkupKind kind, std::string_view scope = {});

// A fresh class name for one output's box: "belljar-s" and 16 hex digits no output can guess.
std::string style_scope();
// The canonical markup of check_markup(..., scope) in its box: the rules name it, and its paint
// containment clips what is drawn and holds what is positioned (fixed, absolute, a z-index, a
// transform, negative margins) inside it, so no output covers the toolbar, a notice or a cell.
// Call it when the verdict is `styled`: elements without attributes take only the page's own
// styles for their kind, which the page keeps to outputs.
std::string contained_markup(const std::string& canonical, const std::string& scope);

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
