// The --active-output checker: every known way of running code from HTML, SVG or markdown in a
// notebook page is classified active; pandas, Styler and matplotlib output pass as inert and
// re-serialized with the same visible text; the bundle policy isolates, strips or allows.
#include "kernel/output/active_output.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

#include "kernel/output/html_sanitizer.hpp"

using namespace belljar;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(BELLJAR_TEST_FIXTURES) + "/" + name);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What a reader sees: the text between tags, references decoded, white space collapsed.
std::string visible_text(const std::string& markup) {
  std::string text;
  bool in_tag = false;
  for (char c : markup) {
    if (c == '<')
      in_tag = true;
    else if (c == '>' && in_tag)
      in_tag = false;
    else if (!in_tag)
      text += c;
  }
  std::string decoded = decode_character_references(text), collapsed;
  for (char c : decoded) {
    bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (collapsed.empty() || collapsed.back() == ' ')) continue;
    collapsed += space ? ' ' : c;
  }
  return collapsed;
}

struct Vector {
  const char* name;
  const char* markup;
};

// Each of these runs script, navigates or loads a document in some browser or parser state.
const Vector kActiveHtml[] = {
    {"script", "<p>hi</p><script>fetch('/api/contents')</script>"},
    {"script, upper case", "<SCRIPT>alert(1)</SCRIPT>"},
    {"img onerror", "<img src=x onerror=alert(1)>"},
    {"img onerror, data: src", "<img src=\"data:image/png;base64,AAAA\" onerror=\"alert(1)\">"},
    {"svg onload", "<svg onload=alert(1)></svg>"},
    {"body onload", "<body onload=alert(1)>"},
    {"javascript: href", "<a href=\"javascript:alert(1)\">x</a>"},
    {"javascript: href, mixed case and spaces", "<a href=\"  JaVaScRiPt:alert(1)\">x</a>"},
    {"javascript: href, tab entity", "<a href=\"jav&#x09;ascript:alert(1)\">x</a>"},
    {"javascript: href, newline entity", "<a href=\"java&#10;script:alert(1)\">x</a>"},
    {"javascript: href, colon entity", "<a href=\"javascript&#58;alert(1)\">x</a>"},
    {"javascript: href, colon entity without ;", "<a href=\"javascript&#58alert(1)\">x</a>"},
    {"javascript: href, leading control", "<a href=\"&#1;javascript:alert(1)\">x</a>"},
    {"javascript: href, unquoted", "<a href=javascript:alert(1)>x</a>"},
    {"vbscript: href", "<a href=\"vbscript:msgbox(1)\">x</a>"},
    {"data:text/html href", "<a href=\"data:text/html,<script>alert(1)</script>\">x</a>"},
    {"relative href to the server", "<a href=\"/terminals/new\">x</a>"},
    {"img from the server", "<img src=\"/terminals/new\">"},
    {"img from http", "<img src=\"http://127.0.0.1:8888/terminals/new\">"},
    {"iframe", "<iframe src=\"/api/contents\"></iframe>"},
    {"iframe srcdoc", "<iframe srcdoc=\"&lt;script&gt;alert(1)&lt;/script&gt;\"></iframe>"},
    {"frame", "<frameset><frame src=\"javascript:alert(1)\"></frameset>"},
    {"form action", "<form action=\"/api/terminals\" method=\"post\"><button>go</button></form>"},
    {"button formaction", "<button formaction=\"javascript:alert(1)\">x</button>"},
    {"input autofocus onfocus", "<input autofocus onfocus=alert(1)>"},
    {"object", "<object data=\"javascript:alert(1)\"></object>"},
    {"embed", "<embed src=\"data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=\">"},
    {"meta refresh", "<meta http-equiv=\"refresh\" content=\"0;url=/terminals/new\">"},
    {"base href", "<base href=\"javascript:alert(1)//\"><a href=\"x\">x</a>"},
    {"link stylesheet", "<link rel=\"stylesheet\" href=\"https://example.com/x.css\">"},
    {"template", "<template><img src=x onerror=alert(1)></template>"},
    {"noscript mXSS", "<noscript><p title=\"</noscript><img src=x onerror=alert(1)>\"></noscript>"},
    {"svg script", "<svg><script>alert(1)</script></svg>"},
    {"svg script, href", "<svg><script href=\"data:text/javascript,alert(1)\"/></svg>"},
    {"svg style mXSS", "<svg><style><img src=x onerror=alert(1)></style></svg>"},
    {"math mXSS", "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>"},
    {"math href", "<math href=\"javascript:alert(1)\">x</math>"},
    {"svg a xlink:href", "<svg><a xlink:href=\"javascript:alert(1)\"><text>x</text></a></svg>"},
    {"svg animate href",
     "<svg><a><animate attributeName=\"href\" "
     "values=\"javascript:alert(1)\"/><text>x</text></a></svg>"},
    {"svg set href",
     "<svg><a><set attributeName=\"href\" to=\"javascript:alert(1)\"/><text>x</text></a></svg>"},
    {"svg foreignObject",
     "<svg><foreignObject><iframe src=\"/api\"></iframe></foreignObject></svg>"},
    {"svg use external", "<svg><use href=\"data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=#x\"/></svg>"},
    {"svg image from the server", "<svg><image href=\"/terminals/new\"/></svg>"},
    {"unclosed tag at the end", "<p>x</p><img src=x onerror=alert(1)"},
    {"unclosed attribute quote", "<img alt=\"x onerror=alert(1)>"},
    {"NUL in a tag name", "(built in the test: a NUL inside <script>)"},
    {"comment abrupt close", "<!--><script>alert(1)</script>-->"},
    {"comment ---> shape", "<!---><img src=x onerror=alert(1)>-->"},
    {"comment with --!>", "<!-- x --!><img src=x onerror=alert(1)>"},
    {"CDATA", "<svg><![CDATA[><img src=x onerror=alert(1)>]]></svg>"},
    {"processing instruction", "<?xml-stylesheet href=\"javascript:alert(1)\"?><p>x</p>"},
    {"bogus comment", "<! foo><img src=x onerror=alert(1)>"},
    {"style @import", "<style>@import url(https://example.com/x.css);</style>"},
    {"style expression", "<p style=\"width: expression(alert(1))\">x</p>"},
    {"style url to the server", "<p style=\"background: url(/terminals/new)\">x</p>"},
    {"style escaped url", "<p style=\"background: u\\72 l(/terminals/new)\">x</p>"},
    {"style comment split", "<style>p { background: url/**/(/x) } @im/**/port 'x';</style>"},
    {"style javascript:", "<style>p { background: url(javascript:alert(1)) }</style>"},
    {"style -moz-binding", "<p style=\"-moz-binding: url(#x)\">x</p>"},
    {"data-* for bootstrap",
     "<a data-toggle=\"collapse\" data-target=\"<img src=x onerror=alert(1)>\">x</a>"},
    {"MathJax href", "<p>$\\href{javascript:alert(1)}{click}$</p>"},
    {"MathJax href split by a tag", "<p>$\\hr<b></b>ef{javascript:alert(1)}{x}$</p>"},
    {"MathJax href entity", "<p>$&#92;href{javascript:alert(1)}{x}$</p>"},
    {"plaintext", "<plaintext><script>alert(1)</script>"},
    {"xmp", "<xmp><script>alert(1)</script></xmp>"},
};

}  // namespace

TEST_CASE("every active HTML vector is classified active", "[active_output]") {
  for (const auto& vector : kActiveHtml) {
    INFO(vector.name);
    std::string markup = std::string(vector.name) == "NUL in a tag name"
                             ? std::string("<scr\0ipt>alert(1)</script>", 25)
                             : std::string(vector.markup);
    MarkupVerdict verdict = check_markup(markup, MarkupKind::html);
    CHECK_FALSE(verdict.inert);
    CHECK_FALSE(verdict.findings.empty());
    // The remainder left by strip is inert itself: checked again, it passes unchanged.
    MarkupVerdict again = check_markup(verdict.canonical, MarkupKind::html);
    INFO(verdict.canonical);
    CHECK(again.inert);
    CHECK(again.canonical == verdict.canonical);
    // (javascript: may stay as text, never as an attribute's value; \href never as a macro.)
    for (const char* never :
         {"<script", "onerror", "onload", "=\"javascript:", "<iframe", "<form", "<meta", "<base",
          "<object", "<embed", "<math", "<animate", "<set", "\\href"})
      CHECK(verdict.canonical.find(never) == std::string::npos);
  }
}

TEST_CASE("an SVG document with a script or handler is active", "[active_output]") {
  for (const char* svg : {
           "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>",
           "<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(1)\"/>",
           "<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"><a "
           "href=\"javascript:alert(1)\"><text>x</text></a></svg>",
           "<svg xmlns=\"http://www.w3.org/1999/xhtml\"><p>x</p></svg>",
           "<!DOCTYPE svg [<!ENTITY x \"<script>alert(1)</script>\">]><svg>&x;</svg>",
           "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>x</text></svg><?php alert(1) ?>",
       }) {
    INFO(svg);
    MarkupVerdict verdict = check_markup(svg, MarkupKind::svg);
    CHECK_FALSE(verdict.inert);
    CHECK(verdict.canonical.find("alert") == std::string::npos);
  }
}

TEST_CASE("pandas DataFrame HTML is inert and keeps its text, table and scoped style",
          "[active_output]") {
  std::string html = fixture("dataframe.html");
  MarkupVerdict verdict = check_markup(html, MarkupKind::html);
  INFO(verdict.canonical);
  for (auto& f : verdict.findings) INFO(f);
  REQUIRE(verdict.inert);
  CHECK(visible_text(verdict.canonical) == visible_text(html));
  CHECK(verdict.canonical.find("<table border=\"1\" class=\"dataframe\">") != std::string::npos);
  CHECK(verdict.canonical.find("<style scoped=\"\">") != std::string::npos);
  CHECK(verdict.canonical.find(".dataframe tbody tr th:only-of-type") != std::string::npos);
  CHECK(verdict.canonical.find("a &lt; b &amp; c") != std::string::npos);
  // Re-serialized output is a fixed point.
  CHECK(check_markup(verdict.canonical, MarkupKind::html).canonical == verdict.canonical);
}

TEST_CASE("pandas Styler HTML is inert and keeps its ids, classes and CSS", "[active_output]") {
  std::string html = fixture("styler.html");
  MarkupVerdict verdict = check_markup(html, MarkupKind::html);
  for (auto& f : verdict.findings) INFO(f);
  REQUIRE(verdict.inert);
  CHECK(visible_text(verdict.canonical) == visible_text(html));
  CHECK(verdict.canonical.find("background-color: yellow;") != std::string::npos);
  CHECK(verdict.canonical.find("<caption>policy</caption>") != std::string::npos);
  CHECK(verdict.canonical.find("class=\"col_heading level0 col0\"") != std::string::npos);
}

TEST_CASE("matplotlib's SVG is inert and keeps its paths, uses and clip paths", "[active_output]") {
  std::string svg = fixture("matplotlib.svg");
  MarkupVerdict verdict = check_markup(svg, MarkupKind::svg);
  for (auto& f : verdict.findings) INFO(f);
  REQUIRE(verdict.inert);
  const std::string& out = verdict.canonical;
  CHECK(out.substr(out.find_first_not_of(" \n")).rfind("<svg ", 0) ==
        0);  // the XML prolog and DOCTYPE are not forwarded
  CHECK(out.find("viewBox=\"0 0 144 108\"") != std::string::npos);
  CHECK(out.find("xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(out.find("<use xlink:href=\"#") != std::string::npos);
  CHECK(out.find("clip-path=\"url(#") != std::string::npos);
  CHECK(out.find("<clipPath id=") != std::string::npos);  // SVG's case is kept (XML readers)
  CHECK(out.find(
            "<style type=\"text/css\">*{stroke-linejoin: round; stroke-linecap: butt}</style>") !=
        std::string::npos);
  CHECK(out.find("metadata") == std::string::npos);
  size_t paths = 0;
  for (size_t at = 0; (at = out.find("<path ", at)) != std::string::npos; ++at) ++paths;
  size_t original_paths = 0;
  for (size_t at = 0; (at = svg.find("<path ", at)) != std::string::npos; ++at) ++original_paths;
  CHECK(paths == original_paths);
  CHECK(check_markup(out, MarkupKind::svg).canonical == out);
}

TEST_CASE("plain formatting, data: images and https links pass as inert", "[active_output]") {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"<b>bold</b> <i>it</i> <code>x&lt;y</code>", "<b>bold</b> <i>it</i> <code>x&lt;y</code>"},
      {"<IMG SRC='data:image/png;base64,iVBORw0KGgo=' width=10>",
       "<IMG SRC=\"data:image/png;base64,iVBORw0KGgo=\" width=\"10\"/>"},
      {"<a href=\"https://example.com/?a=1&amp;b=2\">x</a>",
       "<a href=\"https://example.com/?a=1&amp;b=2\">x</a>"},
      {"<a href='#section'>x</a><a href=\"mailto:a@example.com\">m</a>",
       "<a href=\"#section\">x</a><a href=\"mailto:a@example.com\">m</a>"},
      {"a < b &copy; &unknown; <!-- a comment --> c", "a &lt; b \u00a9 &amp;unknown;  c"},
      {"<div><p>unclosed", "<div><p>unclosed</p></div>"},
      {"</b>stray", "stray"},
      {"$x^2$ and \\(y\\)", "$x^2$ and \\(y\\)"},
  };
  for (auto& c : cases) {
    INFO(c.in);
    MarkupVerdict verdict = check_markup(c.in, MarkupKind::html);
    for (auto& f : verdict.findings) INFO(f);
    CHECK(verdict.inert);
    CHECK(verdict.canonical == c.out);
  }
}

TEST_CASE("URL and CSS rules", "[active_output]") {
  CHECK(link_url_is_inert("https://example.com"));
  CHECK(link_url_is_inert(" HTTPS://example.com"));
  CHECK(link_url_is_inert("#top"));
  CHECK_FALSE(link_url_is_inert("javascript:alert(1)"));
  CHECK_FALSE(link_url_is_inert("java\tscript:alert(1)"));
  CHECK_FALSE(link_url_is_inert("\x01javascript:alert(1)"));
  CHECK_FALSE(link_url_is_inert("/api/contents"));
  CHECK_FALSE(link_url_is_inert("data:text/html;base64,PHNjcmlwdD4="));
  CHECK_FALSE(link_url_is_inert("data:image/svg+xml;base64,PHN2Zz4="));
  CHECK(resource_url_is_inert("data:image/webp;base64,AAAA"));
  CHECK_FALSE(resource_url_is_inert("https://example.com/x.png"));
  CHECK(css_is_inert("fill: url(#p1); stroke: #000"));
  CHECK(css_is_inert("background: url('data:image/png;base64,AAAA')"));
  CHECK_FALSE(css_is_inert("background: url(https://example.com/x.png)"));
  CHECK_FALSE(css_is_inert("background: image-set('https://example.com/x.png' 1x)"));
  CHECK_FALSE(
      css_is_inert("background: src('https://example.com/x.png')"));  // CSS Values 4's url()
  CHECK_FALSE(css_is_inert("behavior: url(x.htc)"));
  CHECK_FALSE(css_is_inert("/* unterminated"));
}

TEST_CASE("markdown with raw HTML or an unsafe link is active", "[active_output]") {
  for (const char* md : {
           "hello <img src=x onerror=alert(1)>",
           "[x](javascript:alert(1))",
           "[x]( javascript:alert(1))",
           "[x](\njavascript:alert(1))",
           "[x](JAVASCRIPT:alert(1))",
           "[x](javascript&#58;alert(1))",
           "[x](javascript&colon;alert(1))",
           "[x](java\\script:alert(1))",
           "![x](/terminals/new)",
           "[x][r]\n\n[r]: javascript:alert(1)",
           "[r]:\n  vbscript:msgbox(1)",
           "<https://example.com>",
           "$\\href{javascript:alert(1)}{x}$",
           "$&#92;href{javascript:alert(1)}{x}$",
           "$&bsol;href{javascript:alert(1)}{x}$",
       }) {
    INFO(md);
    CHECK_FALSE(markdown_is_inert(md));
  }
  for (const char* md : {"# Title\n\n**bold** and `code`, $x^2$",
                         "[docs](https://docs.python.org/3/)", "| a | b |\n|---|---|\n| 1 | 2 |",
                         "![plot](data:image/png;base64,AAAA)", "a &amp; b, 1 > 0"}) {
    INFO(md);
    CHECK(markdown_is_inert(md));
  }
}

TEST_CASE("markdown fences name a plain language, images are data: images (round two)",
          "[active_output]") {
  for (const char* md : {
           "```evil.js?x\ncode\n```",  // Notebook 6 requirejs'd the mode as a URL
           "~~~ ../files/x\ncode\n~~~",
           "> ```a/b\n> x\n> ```",                          // in a quote
           "- item\n\n  ```js?\n  x\n  ```",                // in a list item
           "text\n   ````x.js`\n",                          // a run anywhere on its line
           "```aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nx\n```",  // 33 characters
           "![x](http://127.0.0.1:8888/terminals/new)",     // zero-click GET with cookies
           "![x](https://example.com/a.png)",
           "![x](a.png)",
           "![x][r]\n\n[r]: http://127.0.0.1/terminals/new",
           "![x]\n\n[x]: https://example.com/x.png",
           "[![x](data:image/png;base64,AA)](https://example.com)",
       }) {
    INFO(md);
    CHECK_FALSE(markdown_is_inert(md));
  }
  for (const char* md :
       {"```python\nprint(1)\n```", "~~~\nplain\n~~~", "```c++\nx\n```", "``` objective-c \nx\n```",
        "`inline` and ``two``", "![plot](data:image/png;base64,AAAA)",
        "![a](data:image/png;base64,AA) ![b](data:image/gif;base64,AA)"}) {
    INFO(md);
    CHECK(markdown_is_inert(md));
  }
}

TEST_CASE("isolate puts active output in a sandboxed frame without same-origin",
          "[active_output]") {
  json data = {{"text/html", "<b>x</b><script>fetch('/api/terminals',{method:'POST'})</script>"},
               {"text/plain", "<IPython.core.display.HTML object>"}};
  json out = apply_active_output(data, ActiveOutput::isolate);
  const std::string html = out["text/html"].get<std::string>();
  INFO(html);
  CHECK(html.rfind("<div class=\"belljar-isolated\"><iframe sandbox=\"\" ", 0) == 0);
  CHECK(html.find("allow-") == std::string::npos);  // no script, same origin, forms, popups
  CHECK(html.find("allow-same-origin") == std::string::npos);
  CHECK(html.find("allow-top-navigation") == std::string::npos);
  CHECK(html.find("allow-popups") == std::string::npos);
  CHECK(html.find("allow-forms") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);  // only inside srcdoc, escaped
  CHECK(html.find("fetch(") == std::string::npos);   // not even in srcdoc: checked markup only
  CHECK(html.find("&lt;b&gt;x&lt;/b&gt;") != std::string::npos);
  CHECK(html.find("default-src &#39;none&#39;; style-src &#39;unsafe-inline&#39;; img-src data:; "
                  "font-src data:; media-src data:; form-action &#39;none&#39;; base-uri "
                  "&#39;none&#39;&quot;&gt;") != std::string::npos);
  CHECK(html.find("https:") == std::string::npos);  // no host at all, no CDN
  CHECK(html.find("script-src") == std::string::npos);
  CHECK(html.find("shown in an isolated frame without its active parts") != std::string::npos);
  CHECK(out["text/plain"] == "<IPython.core.display.HTML object>");
  // The frame's own markup is what a browser will parse: checked as HTML, only the iframe is
  // active.
  MarkupVerdict verdict = check_markup(html, MarkupKind::html);
  REQUIRE(verdict.findings.size() == 1);
  CHECK(verdict.findings[0] == "<iframe>");
}

TEST_CASE("isolate runs no application/javascript and strip removes it, each with a notice",
          "[active_output]") {
  json data = {{"application/javascript", "document.title = '</script><script>x'"}};
  json isolated = apply_active_output(data, ActiveOutput::isolate);
  CHECK_FALSE(isolated.contains("application/javascript"));
  std::string notice = isolated["text/html"].get<std::string>();
  CHECK(notice.find("document.title") == std::string::npos);
  CHECK(notice.find("this output holds active content (application/javascript): its script was "
                    "not run (--active-output isolate)") != std::string::npos);
  CHECK(check_markup(notice, MarkupKind::html).inert);
  CHECK(isolated["text/plain"] ==
        "[belljar] active output (application/javascript): not run (--active-output isolate)");

  json stripped = apply_active_output(data, ActiveOutput::strip);
  CHECK_FALSE(stripped.contains("application/javascript"));
  CHECK(stripped["text/html"].get<std::string>().find(
            "active content removed from this output: application/javascript") !=
        std::string::npos);
  CHECK(check_markup(stripped["text/html"].get<std::string>(), MarkupKind::html).inert);
}

TEST_CASE("strip keeps the inert remainder of HTML and SVG", "[active_output]") {
  json data = {
      {"text/html", "<table><tr><td onclick=\"x()\">1</td></tr></table><script>x()</script>"},
      {"image/svg+xml", "<svg><circle r=\"1\" onload=\"x()\"/></svg>"},
      {"text/plain", "t"}};
  json out = apply_active_output(data, ActiveOutput::strip);
  std::string html = out["text/html"].get<std::string>();
  CHECK(html.rfind("<table><tr><td>1</td></tr></table><p ", 0) == 0);
  CHECK(html.find("onclick=") != std::string::npos);  // named in the notice, not as an attribute
  CHECK(html.find("<td onclick") == std::string::npos);
  CHECK(out["image/svg+xml"] == "<svg><circle r=\"1\"></circle></svg>");
}

TEST_CASE("allow passes the bundle unchanged", "[active_output]") {
  json data = {{"application/javascript", "alert(1)"}, {"text/html", "<script>1</script>"}};
  CHECK(apply_active_output(data, ActiveOutput::allow) == data);
}

TEST_CASE("inert types pass unchanged, unknown and exec types are dropped with a visible notice",
          "[active_output]") {
  json data = {{"text/plain", "IntSlider(value=0)"},
               {"application/vnd.jupyter.widget-view+json", {{"model_id", "abc"}}},
               {"application/vnd.bokehjs_exec.v0+json", ""},
               {"text/latex", "$\\frac{1}{2}$"},
               {"image/png", "iVBORw0KGgo="},
               {"application/json", {{"a", 1}}},
               {"application/vnd.belljar.audit+json", {{"records", json::array()}}},
               {"application/vnd.belljar.checkpoint+json", {{"workspace", nullptr}}}};
  json out = apply_active_output(data, ActiveOutput::isolate);
  CHECK(out["application/vnd.belljar.audit+json"] == data["application/vnd.belljar.audit+json"]);
  CHECK(out["application/vnd.belljar.checkpoint+json"] ==
        data["application/vnd.belljar.checkpoint+json"]);
  CHECK(out["text/latex"] == data["text/latex"]);
  CHECK(out["image/png"] == data["image/png"]);
  CHECK(out["application/json"] == data["application/json"]);
  CHECK_FALSE(out.contains("application/vnd.jupyter.widget-view+json"));
  CHECK_FALSE(out.contains("application/vnd.bokehjs_exec.v0+json"));

  json widget =
      apply_active_output({{"text/plain", "IntSlider(value=0)"},
                           {"application/vnd.jupyter.widget-view+json", {{"model_id", "abc"}}}},
                          ActiveOutput::isolate);
  CHECK(widget["text/plain"] ==
        "IntSlider(value=0)\n[belljar] not rendered (active output, --active-output isolate): "
        "application/vnd.jupyter.widget-view+json");

  json latex = apply_active_output({{"text/latex", "$\\href{javascript:alert(1)}{x}$"}},
                                   ActiveOutput::isolate);
  CHECK_FALSE(latex.contains("text/latex"));
  CHECK(latex["text/plain"].get<std::string>().find("text/latex") != std::string::npos);

  json markdown =
      apply_active_output({{"text/markdown", "[x](javascript:alert(1))"}}, ActiveOutput::isolate);
  CHECK_FALSE(markdown.contains("text/markdown"));
  CHECK(markdown["text/plain"] ==
        "[x](javascript:alert(1))\n[belljar] not rendered (active output, --active-output "
        "isolate): text/markdown");
}

TEST_CASE("language_info is the supervisor's, only a well-formed version comes from the worker",
          "[active_output]") {
  json forged = {{"name", "<img src=x onerror=alert(1)>"},
                 {"version", "3.11.2"},
                 {"codemirror_mode", "../../../../files/evil"},
                 {"mimetype", "text/html"}};
  json info = language_info_from_worker(forged);
  CHECK(info["name"] == "python");
  CHECK(info["version"] == "3.11.2");
  CHECK(info["codemirror_mode"] == json({{"name", "ipython"}, {"version", 3}}));
  CHECK(info["mimetype"] == "text/x-python");
  CHECK(language_info_from_worker({{"version", "3<script>"}})["version"] == "3");
  CHECK(language_info_from_worker(json::array())["version"] == "3");
}

TEST_CASE("findings never quote the worker's values, which the page shows as text",
          "[active_output]") {
  MarkupVerdict verdict =
      check_markup("<a href=\"$\\href{javascript:alert(1)}{x}$\">x</a>", MarkupKind::html);
  REQUIRE_FALSE(verdict.inert);
  for (auto& finding : verdict.findings) {
    CHECK(finding.find('\\') == std::string::npos);
    CHECK(finding.find("javascript") == std::string::npos);
  }
  json out = apply_active_output(
      {{"text/plain", "t"}, {"text/$\\href{javascript:alert(1)}{x}$", "x"}}, ActiveOutput::isolate);
  CHECK(out["text/plain"].get<std::string>().find("javascript") == std::string::npos);
}

TEST_CASE("adversarial markup costs linear time and bounded depth", "[active_output]") {
  auto repeat = [](const std::string& unit, size_t times) {
    std::string out;
    out.reserve(unit.size() * times);
    for (size_t i = 0; i < times; ++i) out += unit;
    return out;
  };
  for (const std::string& markup :
       {repeat("<style>p{}</style>", 60000), repeat("<!doctype x>", 100000), repeat("<b>", 300000),
        repeat("<script>", 100000), repeat("<!-- c -->", 100000), repeat("&#x41;", 150000)}) {
    auto started = std::chrono::steady_clock::now();
    MarkupVerdict verdict = check_markup(markup, MarkupKind::html);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    INFO(markup.substr(0, 20) << " x" << markup.size() << ": " << seconds << " s");
    CHECK(seconds < 2.0);
    CHECK(verdict.canonical.size() <= markup.size() * 2);
  }
  CHECK_FALSE(check_markup(repeat("<b>", 300), MarkupKind::html).inert);
  CHECK(check_markup(repeat("<b>", 200), MarkupKind::html).inert);
}

// Round three, finding 10: an inert <style> hid belljar's notices and relabelled the toolbar.
TEST_CASE("inert HTML's styles apply inside its own box only", "[active_output]") {
  json data = {{"text/html",
                "<style>.jp-Toolbar, td.x::before {display:none} "
                "@media screen { :root p {margin:0 !important} }</style><p class=\"x\">1</p>"}};
  std::string html = apply_active_output(data, ActiveOutput::isolate)["text/html"];
  INFO(html);
  REQUIRE(html.rfind("<div class=\"belljar-s", 0) == 0);
  std::string scope = html.substr(12, html.find('"', 12) - 12);
  CHECK(scope.size() == std::string("belljar-s").size() + 16);
  CHECK(html.find("style=\"contain:paint;isolation:isolate;overflow:auto\"><style>." + scope +
                  " :is(.jp-Toolbar), ." + scope + " :is(td.x)::before{display:none}@media " +
                  "screen {." + scope + " :is(:root p){margin:0 !important}}</style><p " +
                  "class=\"x\">1</p></div>") != std::string::npos);
  // Each output its own box: one can't name another's.
  std::string again = apply_active_output(data, ActiveOutput::isolate)["text/html"];
  CHECK(again.substr(12, again.find('"', 12) - 12) != scope);
  // Text without an element needs no box.
  CHECK(apply_active_output({{"text/html", "plain &amp; text"}},
                            ActiveOutput::isolate)["text/html"] == "plain &amp; text");
}

// Notebook 6 puts an SVG document into the page (JupyterLab draws it as an <img>): its rules,
// matplotlib's `*{stroke-linejoin: round}` among them, apply inside its own root only, and its
// root takes no style that could reach past it.
TEST_CASE("an SVG document's styles apply inside its own root only", "[active_output]") {
  json data = {{"image/svg+xml",
                "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\">"
                "<style>*{stroke-linejoin: round} .jp-Toolbar {display:none}</style>"
                "<circle r=\"1\"/></svg>"}};
  std::string svg = apply_active_output(data, ActiveOutput::isolate)["image/svg+xml"];
  INFO(svg);
  REQUIRE(svg.find("<g class=\"belljar-s") != std::string::npos);
  auto at = svg.find("<g class=\"") + 10;
  std::string scope = svg.substr(at, svg.find('"', at) - at);
  CHECK(svg == "\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\"><g class=\"" + scope +
                   "\"><style>." + scope + " :is(*){stroke-linejoin: round}." + scope +
                   " :is(.jp-Toolbar){display:none}</style><circle r=\"1\"></circle></g></svg>");
  // A style on the root would place the image itself (position: fixed over the page): the
  // document is active, shown in the isolated frame.
  json styled = {{"image/svg+xml", "<svg style=\"position:fixed;inset:0\"><circle r=\"1\"/></svg>"},
                 {"text/plain", "t"}};
  json out = apply_active_output(styled, ActiveOutput::isolate);
  CHECK_FALSE(out.contains("image/svg+xml"));
  CHECK(out["text/html"].get<std::string>().find("belljar-isolated") != std::string::npos);
  // Notebook 6 puts the whole document into the page: under a root that is not <svg> (an
  // unknown HTML element there), an <svg> would be a box of the page, its style placing it.
  for (const char* root : {"<g><svg style=\"position:fixed;inset:0\"><circle r=\"1\"/></svg></g>",
                           "<div><svg><circle r=\"1\"/></svg></div>", "<circle r=\"1\"/>",
                           "<svg><circle r=\"1\"/></svg><svg style=\"position:fixed\"></svg>"}) {
    CAPTURE(root);
    CHECK_FALSE(
        apply_active_output({{"image/svg+xml", root}, {"text/plain", "t"}}, ActiveOutput::isolate)
            .contains("image/svg+xml"));
  }
  // A style inside the root stays: it is in the scope's element.
  CHECK(apply_active_output({{"image/svg+xml", "<svg><circle style=\"fill:red\" r=\"1\"/></svg>"}},
                            ActiveOutput::isolate)
            .contains("image/svg+xml"));
}

// The complement of what a <style> may hold: every at-rule but @media and @supports, nesting,
// and a shape a browser would read differently make the output active (an isolated frame).
TEST_CASE("a <style> whose rules can't be kept to the output makes it active", "[active_output]") {
  for (const char* css : {"url(#[[) ), body, x:is(]]{display:none}",
                          "p{background:url(#}) } body{x:y}",
                          "url(#'x) ), body{}",
                          "x\\) , body, y:is( {display:none}",
                          "p /* ) */ , body {}",
                          "p { color: red } /* } body { display: none } */",
                          "@charset \"x\"; p{}",
                          "@color-profile --x {src: none}",
                          "@container (width > 1px) {p{}}",
                          "@counter-style x {system: cyclic}",
                          "@document url-prefix() {p{}}",
                          "@font-feature-values x {@swash {a: 1}}",
                          "@font-palette-values --x {base-palette: 1}",
                          "@keyframes x {from {color: red}}",
                          "@-webkit-keyframes x {from {color: red}}",
                          "@layer x {p{}}",
                          "@layer x;",
                          "@page {margin: 0}",
                          "@position-try --x {top: 0}",
                          "@property --x {syntax: '*'}",
                          "@scope (.x) {p{}}",
                          "@starting-style {p{}}",
                          "@view-transition {navigation: auto}",
                          "@unknown x {p{}}",
                          "@media {@keyframes x {}}",
                          "@media a{@media b{@media c{@media d{@media e{p{}}}}}}",
                          "p { a { color: red } }",
                          "p { color: red",
                          "p { color: red }}",
                          "} p {}",
                          "p",
                          "p;",
                          ", p {}",
                          "p, {}",
                          "p { content: \"}\n\" }",
                          "[title=\"]\n\"] {}",
                          "p) {}",
                          "p] {}"}) {
    INFO(css);
    json out = apply_active_output(
        {{"text/html", std::string("<style>") + css + "</style><b>x</b>"}}, ActiveOutput::isolate);
    CHECK(out["text/html"].get<std::string>().rfind("<div class=\"belljar-isolated\"><iframe", 0) ==
          0);
  }
  for (const char* css : {"p{}", "@media print {p{color:red}}", "@supports (display: grid) {p{}}",
                          "p { content: \"}{\" }", "[title=\"a,b\"], p:is(.a, .b) {color: red}",
                          "@media a{@media b{@media c{@media d{p{}}}}}", "p::part(x):hover {}",
                          "p:not(:is(a::before)) {}", "p {fill: url(#grad)}",
                          "p {fill: URL( #grad-1 )}", "p {background: url(\"#x\")}"}) {
    INFO(css);
    json out = apply_active_output(
        {{"text/html", std::string("<style>") + css + "</style><b>x</b>"}}, ActiveOutput::isolate);
    CHECK(out["text/html"].get<std::string>().rfind("<div class=\"belljar-s", 0) == 0);
  }
}
