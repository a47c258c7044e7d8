// The comm guard: what of the worker's comm traffic the page may receive (widget_models.hpp).
// Each case is a message the sandbox could send and what the page would do with it.
#include "kernel/output/widget_models.hpp"

#include <catch2/catch.hpp>

#include "kernel/output/active_output.hpp"

using namespace belljar;
using nlohmann::json;

namespace {

json open_message(const std::string& id, json data, const std::string& target = "jupyter.widget") {
  return {{"comm_id", id}, {"target_name", target}, {"target_module", nullptr}, {"data", data}};
}

json slider_state() {
  return {{"_model_module", "jupyter-js-widgets"},
          {"_model_name", "IntSliderModel"},
          {"_view_module", "jupyter-js-widgets"},
          {"_view_name", "IntSliderView"},
          {"description", "Workload"},
          {"value", 5}};
}

json update(const std::string& id, json state) {
  return {{"comm_id", id},
          {"data", {{"method", "update"}, {"state", state}, {"buffers", json::array()}}}};
}

}  // namespace

TEST_CASE("a comm_open never carries a module for requirejs", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  json open = open_message("c1", json::object(), "anything");
  open["target_module"] = "/files/evil.js";
  CHECK(models.admit("comm_open", open).empty());
  CHECK(open["target_module"].is_null());

  WidgetModels allowing(ActiveOutput::allow);
  json as_sent = open_message("c1", json::object(), "anything");
  as_sent["target_module"] = "/files/evil.js";
  CHECK(allowing.admit("comm_open", as_sent).empty());
  CHECK(as_sent["target_module"] == "/files/evil.js");
}

TEST_CASE("a widget of another module or with a strange class name is withheld", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  for (json bad : {json{{"_model_module", "/files/x.js"}}, json{{"_view_module", "bqplot"}},
                   json{{"_model_module", 7}}, json{{"_model_name", "../x"}},
                   json{{"_view_name", "constructor.prototype"}},
                   json{{"_model_module_version", "1.0\"; x"}}}) {
    json state = slider_state();
    state.update(bad);
    json open_v6 = open_message("w6", state);
    CHECK_FALSE(models.admit("comm_open", open_v6).empty());
    json open_v7 = open_message("w7", {{"state", state}, {"buffer_paths", json::array()}});
    CHECK_FALSE(models.admit("comm_open", open_v7).empty());
  }
  CHECK(models.target_of("w6").empty());  // the page was never told of them
  json later = update("w6", {{"value", 1}});
  CHECK_FALSE(models.admit("comm_msg", later).empty());
}

TEST_CASE("an update that names another module is withheld, the widget stays", "[widgets]") {
  WidgetModels models(ActiveOutput::strip);
  json open = open_message("s", slider_state());
  REQUIRE(models.admit("comm_open", open).empty());
  json evil = update("s", {{"_view_module", "/files/x.js"}});
  CHECK_FALSE(models.admit("comm_msg", evil).empty());
  json fine = update("s", {{"value", 6}});
  CHECK(models.admit("comm_msg", fine).empty());
  CHECK(fine["data"]["state"]["value"] == 6);
}

TEST_CASE("descriptions and HTML values are re-serialized without their active parts",
          "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  json state = slider_state();
  state["description"] = "<b>a</b><img src=x onerror=alert(1)>";
  json open = open_message("s", state);
  REQUIRE(models.admit("comm_open", open).empty());
  std::string description = open["data"]["description"];
  CHECK(description.find("<b>a</b>") != std::string::npos);
  CHECK(description.find("onerror") == std::string::npos);
  CHECK(models.take_cleaned() == 1);
  CHECK(models.take_cleaned() == 0);

  json html = open_message("h", {{"_model_module", "jupyter-js-widgets"},
                                 {"_model_name", "HTMLModel"},
                                 {"value", "<script>x()</script>ok"}});
  REQUIRE(models.admit("comm_open", html).empty());
  CHECK(html["data"]["value"] == "ok");
  // A later name can't turn the page's HTML model into one whose value is text.
  json renamed = update("h", {{"_model_name", "TextModel"}, {"value", "<img src=x onerror=y>"}});
  REQUIRE(models.admit("comm_msg", renamed).empty());
  CHECK(renamed["data"]["state"]["value"].get<std::string>().find("onerror") == std::string::npos);
}

TEST_CASE("text values stay exactly as sent, typeset ones lose active TeX", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  json text = open_message("t", {{"_model_module", "jupyter-js-widgets"},
                                 {"_model_name", "TextModel"},
                                 {"value", "a < b & <i>c</i> url(x)"},
                                 {"placeholder", "\\href"}});
  REQUIRE(models.admit("comm_open", text).empty());
  CHECK(text["data"]["value"] == "a < b & <i>c</i> url(x)");
  CHECK(text["data"]["placeholder"] == "\\href");

  json label = open_message("l", {{"_model_module", "jupyter-js-widgets"},
                                  {"_model_name", "LabelModel"},
                                  {"value", "$\\href{javascript:x()}{y}$"}});
  REQUIRE(models.admit("comm_open", label).empty());
  CHECK(label["data"]["value"] == "[belljar] withheld: active content");
  json math = update("l", {{"value", "$\\alpha^2$"}});
  REQUIRE(models.admit("comm_msg", math).empty());
  CHECK(math["data"]["state"]["value"] == "$\\alpha^2$");
}

TEST_CASE("layout and style traits are inert CSS or dropped", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  json layout = open_message("L", {{"_model_module", "jupyter-js-widgets"},
                                   {"_model_name", "LayoutModel"},
                                   {"width", "calc(50% - 2px)"},
                                   {"border", "1px solid url(https://example.com/leak)"},
                                   {"height", "1em;background:url(x)"},
                                   {"margin", "\\75 rl(x)"},
                                   {"slider_color", "image-set(\"https://example.com\" 1x)"},
                                   {"grid_template_areas", "\"a b\" \"c d\""}});
  REQUIRE(models.admit("comm_open", layout).empty());
  const json& state = layout["data"];
  CHECK(state["width"] == "calc(50% - 2px)");
  CHECK(state["grid_template_areas"] == "\"a b\" \"c d\"");
  for (const char* gone : {"border", "height", "margin", "slider_color"})
    CHECK_FALSE(state.contains(gone));
  CHECK(models.take_cleaned() == 4);
}

TEST_CASE("newer ipywidgets: Output outputs are outputs, a url image is not fetched", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  json output = open_message(
      "o", {{"state",
             {{"_model_module", "@jupyter-widgets/output"},
              {"_model_name", "OutputModel"},
              {"outputs", json::array({{{"output_type", "display_data"},
                                        {"data", {{"application/javascript", "x()"}}}}})}}}});
  REQUIRE(models.admit("comm_open", output).empty());
  const json& data = output["data"]["state"]["outputs"][0]["data"];
  CHECK(data == apply_active_output({{"application/javascript", "x()"}}, ActiveOutput::isolate));

  json image = open_message("i", {{"state",
                                   {{"_model_module", "@jupyter-widgets/controls"},
                                    {"_model_name", "ImageModel"},
                                    {"format", "url"}}}});
  REQUIRE(models.admit("comm_open", image).empty());
  CHECK_FALSE(image["data"]["state"].contains("format"));
}

TEST_CASE("the page learns only of comms it was told of, views only of checked models",
          "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  json open = open_message("s", slider_state());
  REQUIRE(models.admit("comm_open", open).empty());
  json other = open_message("e", json::object(), "echo");
  REQUIRE(models.admit("comm_open", other).empty());
  models.opened_by_frontend("f", "jupyter.widget.version");

  CHECK(models.target_of("s") == "jupyter.widget");
  CHECK(models.target_of("e") == "echo");
  CHECK(models.target_of("f") == "jupyter.widget.version");
  CHECK(models.target_of("never").empty());
  CHECK(models.view_is_checked({{"model_id", "s"}}));
  CHECK_FALSE(models.view_is_checked({{"model_id", "e"}}));  // not a widget
  CHECK_FALSE(models.view_is_checked({{"model_id", "never"}}));
  CHECK_FALSE(models.view_is_checked("s"));

  json bundle = {
      {"application/vnd.jupyter.widget-view+json", {{"model_id", "s"}, {"extra", "<x>"}}},
      {"text/plain", "IntSlider(value=5)"}};
  json shown = apply_active_output(bundle, ActiveOutput::isolate, &models);
  CHECK(shown["application/vnd.jupyter.widget-view+json"] == json{{"model_id", "s"}});
  json unknown = {{"application/vnd.jupyter.widget-view+json", {{"model_id", "never"}}}};
  CHECK_FALSE(apply_active_output(unknown, ActiveOutput::isolate, &models)
                  .contains("application/vnd.jupyter.widget-view+json"));

  json close = {{"comm_id", "s"}, {"data", json::object()}};
  REQUIRE(models.admit("comm_close", close).empty());
  CHECK(models.target_of("s").empty());
  json stray = update("never", {{"value", 1}});
  CHECK_FALSE(models.admit("comm_msg", stray).empty());
}

TEST_CASE("no more than kMaxComms comms are remembered", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  for (size_t i = 0; i < WidgetModels::kMaxComms; ++i) {
    json open = open_message("c" + std::to_string(i), json::object(), "t");
    REQUIRE(models.admit("comm_open", open).empty());
  }
  json one_more = open_message("last", json::object(), "t");
  CHECK_FALSE(models.admit("comm_open", one_more).empty());
  json close = {{"comm_id", "c0"}, {"data", json::object()}};
  REQUIRE(models.admit("comm_close", close).empty());
  CHECK(models.admit("comm_open", one_more).empty());
}

TEST_CASE("names and versions outside ipywidgets' own grammar are withheld (round two)",
          "[widgets]") {
  // The red team's message: an unknown class whose version the page's "could not create
  // model" table put into the page as markup.
  WidgetModels models(ActiveOutput::strip);
  json attack = open_message("v", {{"_model_module", "@jupyter-widgets/controls"},
                                   {"_model_name", "NoSuchModel"},
                                   {"_model_module_version", "<img src=x onerror=alert(1)>"}});
  CHECK_FALSE(models.admit("comm_open", attack).empty());
  for (json bad :
       {json{{"_model_name", "EvilModel"}}, json{{"_view_name", "ScriptView"}},
        json{{"_model_module_version", "<img src=x>"}}, json{{"_model_module_version", ">=1.0 <2"}},
        json{{"_view_module_version", "1.2.3.4"}}, json{{"_model_module_version", "~1.0.0-beta"}},
        json{{"_model_module_version", "1..2"}}, json{{"_view_module_version", "1234567890.0"}}}) {
    INFO(bad.dump());
    json state = slider_state();
    state.update(bad);
    json open_v7 = open_message("w", {{"state", state}, {"buffer_paths", json::array()}});
    CHECK_FALSE(models.admit("comm_open", open_v7).empty());
  }
  // What ipywidgets 6, 7 and 8 send passes, each module at the majors ipywidgets registers.
  for (auto [module, version] : std::initializer_list<std::pair<const char*, const char*>>{
           {"jupyter-js-widgets", "~2.1.4"},
           {"jupyter-js-widgets", "*"},
           {"jupyter-js-widgets", ""},
           {"@jupyter-widgets/controls", "1.5.0"},
           {"@jupyter-widgets/controls", "2.0.0"},
           {"@jupyter-widgets/controls", "^2.0.0"},
           {"@jupyter-widgets/controls", "2.*"},
           {"@jupyter-widgets/base", "1.2.0"},
           {"@jupyter-widgets/base", "2.0.0"},
           {"@jupyter-widgets/base", "1"},
           {"@jupyter-widgets/output", "1.0.0"}}) {
    INFO(module << " " << version);
    json state = slider_state();
    state["_model_module"] = state["_view_module"] = module;
    state["_model_module_version"] = version;
    state["_view_module_version"] = version;
    json open = open_message(std::string("ok") + module + version, state);
    CHECK(models.admit("comm_open", open).empty());
  }
  // A major ipywidgets never registered for that module is one the page would look for
  // elsewhere (a CDN): withheld.
  for (auto [module, version] : std::initializer_list<std::pair<const char*, const char*>>{
           {"@jupyter-widgets/controls", "3.0.0"},
           {"@jupyter-widgets/controls", "^99.0.0"},
           {"@jupyter-widgets/output", "2.0.0"},
           {"@jupyter-widgets/base", "0.9"},
           {"jupyter-js-widgets", "1.5.0"}}) {
    INFO(module << " " << version);
    json state = slider_state();
    state["_model_module"] = module;
    state["_model_module_version"] = version;
    json open = open_message(std::string("bad") + module + version, state);
    std::string why = models.admit("comm_open", open);
    CHECK(why.find("that ipywidgets registers") != std::string::npos);
  }
  json v8 = open_message("eight", {{"state",
                                    {{"_model_module", "@jupyter-widgets/controls"},
                                     {"_model_name", "TagsInputModel"},
                                     {"_model_module_version", "2.0.0"},
                                     {"_view_module", "@jupyter-widgets/controls"},
                                     {"_view_name", "TagsInputView"},
                                     {"_view_module_version", "2.0.0"}}}});
  CHECK(models.admit("comm_open", v8).empty());
}

TEST_CASE("a comm's target name is a plain name", "[widgets]") {
  WidgetModels models(ActiveOutput::isolate);
  for (const char* target : {"jupyter.widget", "plotly.comm", "belljar-probe", "a:b_c"}) {
    json open = open_message(target, json::object(), target);
    CHECK(models.admit("comm_open", open).empty());
  }
  for (const char* target : {"", "<img src=x onerror=alert(1)>", "../files/x.js", "a b"}) {
    json open = open_message(std::string("bad") + target, json::object(), target);
    CHECK_FALSE(models.admit("comm_open", open).empty());
  }
  WidgetModels allowing(ActiveOutput::allow);
  json open = open_message("any", json::object(), "a b");
  CHECK(allowing.admit("comm_open", open).empty());
}

// -- round three: every target and message shape admitted by one table (kCommShapes) ----------

namespace {

constexpr const char* kActs = "<img src=x onerror=alert(1)><b>kept</b>";

json html_state() {
  return {{"_model_module", "@jupyter-widgets/controls"},
          {"_model_module_version", "2.0.0"},
          {"_model_name", "HTMLModel"},
          {"_view_module", "@jupyter-widgets/controls"},
          {"_view_name", "HTMLView"},
          {"value", "plain"}};
}

// A session where the page knows an HTML widget ("h", opened by the worker), a control comm and a
// version comm (opened by the page) and a comm to a target that is not ipywidgets' ("o").
WidgetModels session(ActiveOutput mode) {
  WidgetModels models(mode);
  json open = open_message("h", {{"state", html_state()}, {"buffer_paths", json::array()}});
  REQUIRE(models.admit("comm_open", open).empty());
  json other = open_message("o", json::object(), "belljar.probe");
  REQUIRE(models.admit("comm_open", other).empty());
  models.opened_by_frontend("ctl", "jupyter.widget.control");
  models.opened_by_frontend("ver", "jupyter.widget.version");
  return models;
}

const char* comm_of(TargetKind kind) {
  switch (kind) {
    case TargetKind::widget:
      return "h";
    case TargetKind::control:
      return "ctl";
    case TargetKind::version:
      return "ver";
    case TargetKind::other:
      break;
  }
  return "o";
}

std::string target_of(TargetKind kind) {
  return kind == TargetKind::other ? "belljar.probe" : std::string(target_kind_name(kind));
}

// The message of one shape, carrying markup that acts in every place that row's page code reads.
json hostile(TargetKind kind, const std::string& type, const std::string& method) {
  json data;
  if (kind == TargetKind::control) {
    json entry = {{"model_name", "HTMLModel"},
                  {"model_module", "@jupyter-widgets/controls"},
                  {"model_module_version", "2.0.0"},
                  {"state", {{"value", kActs}, {"description", kActs}}}};
    data = {{"states", {{"h", entry}}}, {"buffer_paths", json::array()}};
  } else if (kind == TargetKind::version) {
    data = {{"version", "~2.1.4"}, {"value", kActs}};
  } else {
    data = {{"value", kActs},
            {"description", kActs},
            {"state", {{"value", kActs}}},
            {"content", {{"value", kActs}, {"text", kActs}}},
            {"buffer_paths", json::array()}};
  }
  if (type == "comm_msg" && !method.empty()) data["method"] = method;
  json content = {{"comm_id", type == "comm_open" ? "fresh" : comm_of(kind)}, {"data", data}};
  if (type == "comm_open") {
    content["target_name"] = target_of(kind);
    content["target_module"] = nullptr;
  }
  return content;
}

}  // namespace

TEST_CASE("each row of kCommShapes is checked: markup that acts is cleaned or refused",
          "[widgets][comm-shapes]") {
  for (const CommShape& row : kCommShapes) {
    std::string type(row.type), method(row.method == "*" ? "anything" : row.method);
    CAPTURE(target_kind_name(row.target), type, method);
    WidgetModels models = session(ActiveOutput::isolate);
    json message = hostile(row.target, type, method);
    std::string why = models.admit(type, message);
    if (why.empty()) CHECK(message.dump().find("onerror") == std::string::npos);
    // The control: the same message passes whole under allow, so the probe carries what acts.
    WidgetModels allowing = session(ActiveOutput::allow);
    json as_sent = hostile(row.target, type, method);
    REQUIRE(allowing.admit(type, as_sent).empty());
    CHECK(as_sent.dump().find("onerror") != std::string::npos);
  }
}

TEST_CASE("every target, message and method outside kCommShapes is withheld",
          "[widgets][comm-shapes]") {
  // Every method any ipywidgets sends or receives, and some it never did.
  const std::vector<std::string> methods = {
      "",         "update",         "echo_update",   "custom",   "display",   "request_state",
      "backbone", "request_states", "update_states", "anything", "__proto__", "constructor"};
  size_t refused = 0;
  for (TargetKind kind :
       {TargetKind::widget, TargetKind::control, TargetKind::version, TargetKind::other}) {
    for (const std::string type : {"comm_open", "comm_msg", "comm_close"}) {
      for (const std::string& method : methods) {
        if (type != "comm_msg" && !method.empty()) continue;  // only comm_msg has a method
        if (find_comm_shape(kind, type, method)) continue;    // a row: the case above
        CAPTURE(target_kind_name(kind), type, method);
        WidgetModels models = session(ActiveOutput::isolate);
        json message = hostile(kind, type, method);
        message["data"] = {{"method", method}};  // nothing else to object to but its shape
        if (method.empty()) message["data"].erase("method");
        CHECK_FALSE(models.admit(type, message).empty());
        ++refused;
      }
    }
  }
  // widget: msg without a method or with one ipywidgets never sends the page (8); control: open,
  // and msg with any method but update_states (12); version: open, and msg with a method (12).
  CHECK(refused == 8 + 12 + 12);
  // A method that is not a name is no method of any row.
  WidgetModels models = session(ActiveOutput::isolate);
  json odd = {{"comm_id", "h"}, {"data", {{"method", json::array({"update"})}}}};
  CHECK_FALSE(models.admit("comm_msg", odd).empty());
}

TEST_CASE("update_states: each model as its own, only models the page had, buffers in place",
          "[widgets][comm-shapes]") {
  WidgetModels models = session(ActiveOutput::isolate);
  for (const char* id : {"s", "e"}) {
    json slider = open_message(id, {{"state", slider_state()}});
    REQUIRE(models.admit("comm_open", slider).empty());
  }
  auto entry = [](json state, const char* name) {
    return json{{"model_name", name},
                {"model_module", "@jupyter-widgets/controls"},
                {"model_module_version", "2.0.0"},
                {"state", state}};
  };
  json reply = {{"comm_id", "ctl"},
                {"data",
                 {{"method", "update_states"},
                  {"states",
                   {{"h", entry({{"value", kActs}, {"layout", "IPY_MODEL_l"}}, "HTMLModel")},
                    {"s", entry({{"value", 5}, {"description", kActs}}, "IntSliderModel")},
                    {"o", entry({{"value", "x"}}, "HTMLModel")},       // not a widget
                    {"never", entry({{"value", "x"}}, "HTMLModel")},   // never told of
                    {"e", entry({{"value", 1}}, "IntSliderModel")}}},  // see below
                  {"buffer_paths",
                   {{"h", "state", "value"},
                    {"never", "state", "value"},
                    {"s", "state", "_model_name"},
                    {"s", "custom"}}},
                  {"extra", kActs}}}};
  reply["data"]["states"]["e"]["model_module"] = "/files/evil.js";  // a model the page had
  std::vector<std::string> buffers = {"a", "b", "c", "d"};
  REQUIRE(models.admit("comm_msg", reply, buffers).empty());
  const json& data = reply["data"];
  CHECK(data.size() == 3);  // method, states, buffer_paths: nothing else passes
  CHECK(data["states"].size() == 2);
  CHECK(data["states"]["h"]["state"]["value"] == "<img/><b>kept</b>");
  CHECK(data["states"]["h"]["state"]["layout"] == "IPY_MODEL_l");
  CHECK(data["states"]["s"]["state"]["description"] == "<img/><b>kept</b>");
  CHECK(data["states"]["s"]["model_name"] == "IntSliderModel");
  CHECK(data["buffer_paths"] == json::array({{"h", "state", "value"}}));
  CHECK(buffers == std::vector<std::string>{"a"});
  CHECK(models.take_cleaned() > 0);

  // A model's record holds: an HTML model named a slider in the reply is still read as markup.
  json renamed = {{"comm_id", "ctl"},
                  {"data",
                   {{"method", "update_states"},
                    {"states", {{"h", entry({{"value", kActs}}, "IntSliderModel")}}},
                    {"buffer_paths", json::array()}}}};
  REQUIRE(models.admit("comm_msg", renamed).empty());
  CHECK(renamed["data"]["states"]["h"]["state"]["value"] == "<img/><b>kept</b>");
}

TEST_CASE("widget buffers go only where buffer paths place them, never on a name",
          "[widgets][comm-shapes]") {
  WidgetModels models = session(ActiveOutput::isolate);
  auto with_paths = [](json paths) {
    return json{
        {"comm_id", "h"},
        {"data", {{"method", "update"}, {"state", json::object()}, {"buffer_paths", paths}}}};
  };
  std::vector<std::string> one = {"x"};
  json placed = with_paths(json::parse(R"([["value"]])"));
  CHECK(models.admit("comm_msg", placed, one).empty());
  for (const char* paths :
       {R"([])", R"([["_model_module"]])", R"([["_view_name"]])", R"([[]])", R"([[0, "value"]])",
        R"([["value", -1]])", R"([["a"], ["b"]])", R"("value")"}) {
    CAPTURE(paths);
    std::vector<std::string> buffers = {"x"};
    json message = with_paths(json::parse(paths));
    CHECK_FALSE(models.admit("comm_msg", message, buffers).empty());
  }
  std::vector<std::string> loose = {"x"};  // buffers with no place named
  json unplaced = {{"comm_id", "h"}, {"data", {{"method", "custom"}, {"content", json::object()}}}};
  CHECK_FALSE(models.admit("comm_msg", unplaced, loose).empty());
  std::vector<std::string> keys = {"x"};  // ipywidgets 6 names keys
  json v6 = {{"comm_id", "h"},
             {"data", json::parse(R"({"method": "update", "state": {}, "buffers": ["value"]})")}};
  CHECK(models.admit("comm_msg", v6, keys).empty());
}

TEST_CASE("the worker never opens the page's own comms, nor reopens one the page knows",
          "[widgets][comm-shapes]") {
  WidgetModels models = session(ActiveOutput::isolate);
  for (const char* target : {"jupyter.widget.control", "jupyter.widget.version"}) {
    json open = open_message(std::string("mine-") + target, json::object(), target);
    CHECK_FALSE(models.admit("comm_open", open).empty());
  }
  // Reopening the control comm's id as something else would change how its replies are read.
  json over = open_message("ctl", json::object(), "belljar.probe");
  CHECK_FALSE(models.admit("comm_open", over).empty());
  CHECK(models.target_of("ctl") == "jupyter.widget.control");
}

TEST_CASE("an Output model's outputs are outputs of the four kinds, bundles as displays",
          "[widgets][comm-shapes]") {
  WidgetModels models = session(ActiveOutput::isolate);
  json view = {{"application/vnd.jupyter.widget-view+json", {{"model_id", "h"}}}};
  json outputs_sent = json::array({{{"output_type", "display_data"}, {"data", view}},
                                   {{"output_type", "stream"}, {"name", "stdout"}, {"text", "hi"}},
                                   {{"output_type", "something_else"}, {"html", kActs}},
                                   "not an output"});
  json output = open_message("out", {{"state",
                                      {{"_model_module", "@jupyter-widgets/output"},
                                       {"_model_name", "OutputModel"},
                                       {"outputs", outputs_sent}}}});
  REQUIRE(models.admit("comm_open", output).empty());
  const json& outputs = output["data"]["state"]["outputs"];
  REQUIRE(outputs.size() == 2);
  // A view of a checked model still shows.
  CHECK(outputs[0]["data"]["application/vnd.jupyter.widget-view+json"] == json{{"model_id", "h"}});
  CHECK(outputs[1]["text"] == "hi");
}

TEST_CASE("no message may give the page's copy of a state a prototype", "[widgets][comm-shapes]") {
  // Backbone's set and ipywidgets' deserialization copy a state key by key (obj[key] = value):
  // a "__proto__" key sets the copy's prototype, and what it holds is inherited, unchecked.
  for (const char* data :
       {R"({"__proto__": {"_view_module": "/files/evil.js", "_view_name": "X"}})",
        R"({"method": "update", "state": {"__proto__": {"_view_module": "/files/evil.js"}}})",
        R"({"method": "custom", "content": {"list": [{"__proto__": {}}]}})"}) {
    CAPTURE(data);
    WidgetModels models = session(ActiveOutput::isolate);
    json message = {{"comm_id", "h"}, {"data", json::parse(data)}};
    CHECK_FALSE(models.admit("comm_msg", message).empty());
    json open = open_message("fresh", json::parse(data));
    CHECK_FALSE(models.admit("comm_open", open).empty());
    json other = {{"comm_id", "o"}, {"data", json::parse(data)}};
    CHECK_FALSE(models.admit("comm_msg", other).empty());
  }
  json states = json::parse(R"({"method": "update_states", "buffer_paths": [],
      "states": {"h": {"model_name": "HTMLModel", "state": {"__proto__": {"value": "x"}}}}})");
  WidgetModels models = session(ActiveOutput::isolate);
  json reply = {{"comm_id", "ctl"}, {"data", states}};
  CHECK_FALSE(models.admit("comm_msg", reply).empty());
  // Nor may a buffer path walk out of the state into a prototype.
  for (const char* path : {R"([["__proto__", "x"]])", R"([["value", "constructor", "prototype"]])",
                           R"([["a", "prototype"]])"}) {
    CAPTURE(path);
    std::vector<std::string> buffers = {"x"};
    json message = {
        {"comm_id", "h"},
        {"data",
         {{"method", "update"}, {"state", json::object()}, {"buffer_paths", json::parse(path)}}}};
    CHECK_FALSE(models.admit("comm_msg", message, buffers).empty());
  }
}

TEST_CASE("a link the page runs joins only text traits of models it was told of",
          "[widgets][comm-shapes]") {
  // jslink copies values in the page, past the checks: a Text's value (passed as is) linked to
  // an HTML value would go in as markup.
  WidgetModels models = session(ActiveOutput::isolate);
  for (auto [id, model] : {std::pair{"t", "TextModel"}, std::pair{"n", "IntTextModel"},
                           std::pair{"l", "LabelModel"}}) {
    json open = open_message(id, {{"state",
                                   {{"_model_module", "@jupyter-widgets/controls"},
                                    {"_model_name", model},
                                    {"value", "<img src=x onerror=alert(1)>"}}}});
    REQUIRE(models.admit("comm_open", open).empty());
  }
  size_t links = 0;
  auto link = [&links](json source, json target) {
    return open_message("link" + std::to_string(++links),
                        {{"state",
                          {{"_model_module", "@jupyter-widgets/controls"},
                           {"_model_name", "LinkModel"},
                           {"source", source},
                           {"target", target}}}});
  };
  json fine = link({"IPY_MODEL_t", "value"}, {"IPY_MODEL_n", "value"});
  CHECK(models.admit("comm_open", fine).empty());
  CHECK(fine["data"]["state"]["source"] == json{"IPY_MODEL_t", "value"});
  json tooltip = link({"IPY_MODEL_t", "value"}, {"IPY_MODEL_n", "tooltip"});
  CHECK(models.admit("comm_open", tooltip).empty());
  for (auto [source, target] : {std::pair{"t", "h"}, std::pair{"h", "t"}, std::pair{"t", "l"},
                                std::pair{"t", "never"}, std::pair{"t", "o"}}) {
    CAPTURE(source, target);
    json into = link({std::string("IPY_MODEL_") + source, "value"},
                     {std::string("IPY_MODEL_") + target, "value"});
    CHECK_FALSE(models.admit("comm_open", into).empty());
  }
  for (const char* trait : {"description", "layout", "width", "_view_module"}) {
    CAPTURE(trait);
    json into = link({"IPY_MODEL_t", "value"}, {"IPY_MODEL_n", trait});
    CHECK_FALSE(models.admit("comm_open", into).empty());
  }
  // An update may not re-point a link either.
  json update_link = update("link1", {{"target", {"IPY_MODEL_h", "value"}}});
  CHECK_FALSE(models.admit("comm_msg", update_link).empty());
  // The page takes the first two items of whatever array an end is (the outside red team's
  // third pass: [Text, "value", 0] to [HTML, "value", 0] ran script): only [model, trait].
  for (const json& end :
       {json::array({"IPY_MODEL_h", "value", 0}), json::array({"IPY_MODEL_h", "value", "x"}),
        json::array({json::array({"IPY_MODEL_h", "value"})}), json::array({"IPY_MODEL_h"}),
        json::array()}) {
    CAPTURE(end);
    json into = link(json::array({"IPY_MODEL_t", "value"}), end);
    CHECK_FALSE(models.admit("comm_open", into).empty());
    json from = link(end, json::array({"IPY_MODEL_n", "value"}));
    CHECK_FALSE(models.admit("comm_open", from).empty());
  }
  json extra =
      link(json::array({"IPY_MODEL_t", "value", 0}), json::array({"IPY_MODEL_n", "value"}));
  CHECK_FALSE(models.admit("comm_open", extra).empty());
  json exact = link(json::array({"IPY_MODEL_t", "value"}), json::array({"IPY_MODEL_n", "value"}));
  CHECK(models.admit("comm_open", exact).empty());  // the control: the exact shape passes
}
