// The comm guard (widget_models.hpp): which comms the page knows, and what of a widget model's
// state it may be given. The rules follow what ipywidgets' page code does with each trait,
// read from Notebook 6's comm.js and widgetsnbextension's extension.js (jupyter-js-widgets):
// requirejs for modules, innerHTML for `description` and HTML values, MathJax for Label and
// HTMLMath, element.style for layout and style traits.
#include "kernel/output/widget_models.hpp"

#include <algorithm>
#include <set>
#include <string_view>

#include "kernel/output/active_output.hpp"
#include "kernel/output/html_sanitizer.hpp"
#include "kernel/protocol/json_field.hpp"

namespace belljar {

namespace {

using json = nlohmann::json;

constexpr std::string_view kWithheldText = "[belljar] withheld: active content";

// ipywidgets' own packages: 6 ("jupyter-js-widgets") and 7/8. Their classes ship with the page;
// any other name is a file for requirejs to fetch and run.
const std::set<std::string, std::less<>> kOwnModules = {
    "jupyter-js-widgets", "@jupyter-widgets/base", "@jupyter-widgets/controls",
    "@jupyter-widgets/output"};

// Traits whose text is shown as text (textContent, an attribute, an input's value) and so is
// not CSS; every other string trait may end up in element.style and is checked as CSS.
const std::set<std::string, std::less<>> kTextTraits = {
    "value",   "placeholder", "tooltip", "tooltips", "description_tooltip", "_options_labels",
    "options", "_titles",     "titles",  "msg_id",   "readout_format",      "_b64value"};

// The message's own keys around a state (7/8: data.state, data.buffer_paths, a custom
// message's content): no view reads them as traits.
const std::set<std::string, std::less<>> kEnvelope = {"state", "buffers", "buffer_paths",
                                                      "content"};

// The class names ipywidgets 6, 7 and 8 register (`_model_name` / `_view_name` of every widget
// in their Python packages, less test classes): the page looks a name up in the module's own
// registry, and anything else reaches its "could not create model" path, which puts names and
// versions into the page as markup. So a name is one of these or the message is withheld.
const std::set<std::string, std::less<>> kModelNames = {"AccordionModel",
                                                        "AudioModel",
                                                        "BoolModel",
                                                        "BoundedFloatTextModel",
                                                        "BoundedIntTextModel",
                                                        "BoxModel",
                                                        "ButtonModel",
                                                        "ButtonStyleModel",
                                                        "CheckboxModel",
                                                        "CheckboxStyleModel",
                                                        "ColorPickerModel",
                                                        "ColorsInputModel",
                                                        "ComboboxModel",
                                                        "ControllerAxisModel",
                                                        "ControllerButtonModel",
                                                        "ControllerModel",
                                                        "DOMWidgetModel",
                                                        "DatePickerModel",
                                                        "DatetimeModel",
                                                        "DescriptionModel",
                                                        "DescriptionStyleModel",
                                                        "DirectionalLinkModel",
                                                        "DropdownModel",
                                                        "FileUploadModel",
                                                        "FloatLogSliderModel",
                                                        "FloatProgressModel",
                                                        "FloatRangeSliderModel",
                                                        "FloatSliderModel",
                                                        "FloatTextModel",
                                                        "FloatsInputModel",
                                                        "GridBoxModel",
                                                        "HBoxModel",
                                                        "HTMLMathModel",
                                                        "HTMLMathStyleModel",
                                                        "HTMLModel",
                                                        "HTMLStyleModel",
                                                        "ImageModel",
                                                        "IntProgressModel",
                                                        "IntRangeSliderModel",
                                                        "IntSliderModel",
                                                        "IntTextModel",
                                                        "IntsInputModel",
                                                        "LabelModel",
                                                        "LabelStyleModel",
                                                        "LabeledWidgetModel",
                                                        "LayoutModel",
                                                        "LinkModel",
                                                        "MultipleSelectionModel",
                                                        "NaiveDatetimeModel",
                                                        "NumbersInputBaseModel",
                                                        "OutputModel",
                                                        "PasswordModel",
                                                        "PlayModel",
                                                        "ProgressModel",
                                                        "ProgressStyleModel",
                                                        "RadioButtonsModel",
                                                        "SelectModel",
                                                        "SelectMultipleModel",
                                                        "SelectionRangeSliderModel",
                                                        "SelectionSliderModel",
                                                        "SliderStyleModel",
                                                        "StackModel",
                                                        "StringModel",
                                                        "StringStyleModel",
                                                        "StyleModel",
                                                        "TabModel",
                                                        "TagsInputBaseModel",
                                                        "TagsInputModel",
                                                        "TextModel",
                                                        "TextStyleModel",
                                                        "TextareaModel",
                                                        "TimeModel",
                                                        "ToggleButtonModel",
                                                        "ToggleButtonStyleModel",
                                                        "ToggleButtonsModel",
                                                        "ToggleButtonsStyleModel",
                                                        "VBoxModel",
                                                        "ValidModel",
                                                        "VideoModel",
                                                        "WidgetModel"};
const std::set<std::string, std::less<>> kViewNames = {"AccordionView",
                                                       "AudioView",
                                                       "BoxView",
                                                       "ButtonView",
                                                       "CheckboxView",
                                                       "ColorPickerView",
                                                       "ColorsInputView",
                                                       "ComboboxView",
                                                       "ControllerAxisView",
                                                       "ControllerButtonView",
                                                       "ControllerView",
                                                       "DatePickerView",
                                                       "DatetimeView",
                                                       "DropdownView",
                                                       "FileUploadView",
                                                       "FloatLogSliderView",
                                                       "FloatRangeSliderView",
                                                       "FloatSliderView",
                                                       "FloatTextView",
                                                       "FloatsInputView",
                                                       "GridBoxView",
                                                       "HBoxView",
                                                       "HTMLMathView",
                                                       "HTMLView",
                                                       "ImageView",
                                                       "IntRangeSliderView",
                                                       "IntSliderView",
                                                       "IntTextView",
                                                       "IntsInputView",
                                                       "LabelView",
                                                       "LayoutView",
                                                       "OutputView",
                                                       "PasswordView",
                                                       "PlayView",
                                                       "ProgressView",
                                                       "RadioButtonsView",
                                                       "SelectMultipleView",
                                                       "SelectView",
                                                       "SelectionRangeSliderView",
                                                       "SelectionSliderView",
                                                       "StackView",
                                                       "StyleView",
                                                       "TabView",
                                                       "TagsInputView",
                                                       "TextView",
                                                       "TextareaView",
                                                       "TimeView",
                                                       "ToggleButtonView",
                                                       "ToggleButtonsView",
                                                       "VBoxView",
                                                       "ValidView",
                                                       "VideoView"};

// Tested by hand rather than with std::regex, whose locale machinery would stay resident in
// the supervisor for a few character classes.
bool ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

// A module version as ipywidgets writes one: "", "*" or ^[~^]?\d{1,9}(\.\d{1,9}){0,2}(\.\*)?$
// ("~2.1.4", "1.5.0", "^2.0.0", "2.*"). Nothing else: the page may show the string as markup.
bool is_widget_version(std::string_view version) {
  if (version.empty() || version == "*") return true;
  if (version.front() == '~' || version.front() == '^') version.remove_prefix(1);
  if (version.ends_with(".*")) version.remove_suffix(2);
  size_t parts = 0;
  while (true) {
    size_t digits = 0;
    while (digits < version.size() && ascii_digit(version[digits])) ++digits;
    if (digits == 0 || digits > 9 || ++parts > 3) return false;
    version.remove_prefix(digits);
    if (version.empty()) return true;
    if (version.front() != '.') return false;
    version.remove_prefix(1);
  }
}

// The majors of each of ipywidgets' own modules that ipywidgets 6, 7 and 8 register:
// jupyter-js-widgets 2 (6), base 1 and controls 1 (7), base 2 and controls 2 (8), output 1
// (7, 8). A version naming another major is one the page has no class for: a widget manager
// that cannot find it may fetch the module from a CDN, which no notebook of ours asks for.
bool known_major(std::string_view module, std::string_view version) {
  if (version.empty() || version == "*") return true;  // any: the page's own
  if (version.front() == '~' || version.front() == '^') version.remove_prefix(1);
  std::string_view major = version.substr(0, version.find('.'));
  if (module == "jupyter-js-widgets") return major == "2";
  if (module == "@jupyter-widgets/base" || module == "@jupyter-widgets/controls")
    return major == "1" || major == "2";
  if (module == "@jupyter-widgets/output") return major == "1";
  return false;
}

// A comm target as libraries name them ("jupyter.widget", "plotly.comm"): the page looks it up
// and may name it in a message, so [A-Za-z0-9_.:-]{1,128} and nothing else.
bool is_comm_target(std::string_view target) {
  return !target.empty() && target.size() <= 128 &&
         std::all_of(target.begin(), target.end(), [](char c) {
           return ascii_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
                  c == '.' || c == ':' || c == '-';
         });
}

bool markup_model(const std::string& name) {
  return name == "HTMLModel" || name == "HTMLMathModel";
}
bool typeset_model(const std::string& name) {
  return name == "LabelModel" || name == "HTMLMathModel";
}

// One CSS value, as element.style[trait] = value receives it.
bool css_value_is_inert(const std::string& value) {
  return value.find_first_of(";{}") == std::string::npos && css_is_inert(value);
}

// Every string inside `value` (nested lists and objects too) is inert CSS.
bool all_css_inert(const json& value) {
  if (value.is_string()) return css_value_is_inert(value.get_ref<const std::string&>());
  if (value.is_structured())
    return std::all_of(value.begin(), value.end(),
                       [](const json& item) { return all_css_inert(item); });
  return true;
}

// Where a buffer goes in a state (a DataView there): keys and indices, at most 64 deep, the first a
// key that names no class, module or version (the checks decided on a string there).
// A step through a JavaScript object that leaves it for its prototype: the page's put_buffers
// walks a path with obj[step], so ["__proto__", "x"] or ["constructor", "prototype", "x"] would
// set a property of every object in the page.
bool leaves_the_object(const std::string& key) {
  return key == "__proto__" || key == "constructor" || key == "prototype";
}

bool is_buffer_place(const json& path) {
  if (!path.is_array() || path.empty() || path.size() > 64 || !path.front().is_string())
    return false;
  const std::string& head = path.front().get_ref<const std::string&>();
  if (head.starts_with("_model_") || head.starts_with("_view_")) return false;
  return std::all_of(path.begin(), path.end(), [](const json& step) {
    return (step.is_string() && !leaves_the_object(step.get_ref<const std::string&>())) ||
           step.is_number_unsigned();
  });
}

// A "__proto__" key anywhere in the data. JSON.parse makes it an own key, but the page copies
// state with obj[key] = value (Backbone's set, ipywidgets' deserialization), which sets the
// copy's prototype instead: every trait in it is then inherited, unseen by the checks here (a
// `_view_module` the page hands to requirejs, a class name for the error box).
bool holds_a_prototype(const json& value) {
  if (value.is_object())
    for (const auto& [key, item] : value.items())
      if (key == "__proto__" || holds_a_prototype(item)) return true;
  if (value.is_array())
    return std::any_of(value.begin(), value.end(),
                       [](const json& item) { return holds_a_prototype(item); });
  return false;
}

// Markup as html_sanitizer re-serializes it: the active parts (and active TeX) removed.
std::string inert_markup(const std::string& markup, size_t& cleaned) {
  if (markup.find_first_of("<&$\\") == std::string::npos) return markup;  // plain text
  // The page puts the value in with innerHTML: its styles are kept to a box of its own.
  std::string scope = style_scope();
  MarkupVerdict verdict = check_markup(markup, MarkupKind::html, scope);
  if (!verdict.inert) ++cleaned;
  return verdict.styled ? contained_markup(verdict.canonical, scope) : verdict.canonical;
}

// Where a message's buffers go, as the page puts them (ipywidgets 7/8: `buffer_paths`, a list of
// key paths into the state; 6: `buffers`, a list of keys): one place per buffer, each a path of
// keys and indices into the state that names no class, module or version (a buffer there is a
// DataView where the checks above decided on a string). Anything else withholds the message.
std::string check_buffer_places(const json& data, size_t buffers) {
  const json* places = nullptr;
  for (const char* key : {"buffer_paths", "buffers"})
    if (auto it = data.find(key); it != data.end() && !it->is_null()) {
      if (places) return "a widget message with both buffer_paths and buffers";
      places = &*it;
    }
  if (!places) return buffers == 0 ? "" : "a widget message whose buffers have no buffer_paths";
  if (!places->is_array() || places->size() != buffers)
    return "a widget message whose buffer_paths are not one path per buffer";
  for (const json& place : *places)
    if (!is_buffer_place(place.is_array() ? place : json::array({place})))
      return "a widget message with a buffer path that is not a key path to a trait";
  return "";
}

}  // namespace

TargetKind target_kind(std::string_view target) {
  if (target == "jupyter.widget") return TargetKind::widget;
  if (target == "jupyter.widget.control") return TargetKind::control;
  if (target == "jupyter.widget.version") return TargetKind::version;
  return TargetKind::other;
}

std::string_view target_kind_name(TargetKind kind) {
  switch (kind) {
    case TargetKind::widget:
      return "jupyter.widget";
    case TargetKind::control:
      return "jupyter.widget.control";
    case TargetKind::version:
      return "jupyter.widget.version";
    case TargetKind::other:
      break;
  }
  return "a target not ipywidgets'";
}

const CommShape* find_comm_shape(TargetKind target, std::string_view type,
                                 std::string_view method) {
  for (const CommShape& row : kCommShapes)
    if (row.target == target && row.type == type && (row.method == "*" || row.method == method))
      return &row;
  return nullptr;
}

std::string WidgetModels::check_state(json& state, Comm& comm, bool envelope) {
  // Module and class names first: a refusal here withholds the whole message.
  for (const char* key : {"_model_module", "_view_module"}) {
    auto it = state.find(key);
    if (it == state.end() || it->is_null()) continue;
    if (!it->is_string() || !kOwnModules.count(it->get_ref<const std::string&>()))
      return std::string("a widget whose ") + key + " is " + it->dump(-1, ' ', true) +
             ": only ipywidgets' own widgets are shown, another library's code would run in the "
             "notebook page";
  }
  for (auto [key, registry] :
       {std::pair{"_model_name", &kModelNames}, std::pair{"_view_name", &kViewNames}}) {
    auto it = state.find(key);
    if (it == state.end() || it->is_null()) continue;
    if (!it->is_string() || !registry->count(it->get_ref<const std::string&>()))
      return std::string("a widget whose ") + key + " is not one of ipywidgets' own classes";
  }
  for (auto [key, module_key] : {std::pair{"_model_module_version", "_model_module"},
                                 std::pair{"_view_module_version", "_view_module"}}) {
    auto it = state.find(key);
    if (it == state.end() || it->is_null()) continue;
    if (!it->is_string() || !is_widget_version(it->get_ref<const std::string&>()))
      return std::string("a widget whose ") + key + " is not a version";
    // Checked against its module when the same message names it (an update may not).
    auto module = state.find(module_key);
    if (module != state.end() && module->is_string() &&
        !known_major(module->get_ref<const std::string&>(), it->get_ref<const std::string&>()))
      return std::string("a widget whose ") + key + " is " + it->get<std::string>() +
             ": not a version of " + module->get<std::string>() + " that ipywidgets registers";
  }
  if (auto name = state.find("_model_name"); name != state.end() && name->is_string()) {
    // The page's class is the first name it saw: once a name allowed markup, it always does.
    const std::string& model = name->get_ref<const std::string&>();
    comm.value_is_markup = (comm.named && comm.value_is_markup) || markup_model(model);
    comm.value_is_typeset = (comm.named && comm.value_is_typeset) || typeset_model(model);
    comm.named = true;
  }

  for (auto it = state.begin(); it != state.end();) {
    const std::string& key = it.key();
    json& value = it.value();
    bool keep = true;
    if (key == "description" && value.is_string()) {
      value = inert_markup(value.get_ref<const std::string&>(), cleaned_);
    } else if (key == "value" && value.is_string()) {
      const std::string& text = value.get_ref<const std::string&>();
      if (comm.value_is_markup) {
        value = inert_markup(text, cleaned_);
      } else if (comm.value_is_typeset && !tex_is_inert(text)) {
        value = kWithheldText;
        ++cleaned_;
      }
    } else if ((key == "source" || key == "target") && value.is_array()) {
      // jslink / jsdlink (LinkModel, DirectionalLinkModel): the page itself copies one model's
      // trait into another's, past every check here. A Text's value (text, passed as is) linked
      // to an HTML value would be put in as markup: both ends must be text traits of models the
      // page was told of. The page takes the first two items of any array it is given, so the
      // whole shape is decided: exactly [model, trait], nothing after.
      if (!is_model_reference(value) || !links_text(value))
        return "a link whose " + key +
               " is not a text trait of a checked widget: the page would copy values into a "
               "trait that is markup, TeX or CSS";
    } else if (key == "outputs" && value.is_array()) {
      check_outputs(value);  // an Output model's (ipywidgets 7/8): outputs like any other
    } else if (key == "format" && value.is_string() &&
               value.get_ref<const std::string&>() == "url") {
      keep = false;  // Image/Video/Audio: the value would be a URL for the browser to fetch
    } else if (envelope && key == "method" && value.is_string()) {
      // the message's method, already decided by the table (kCommShapes)
    } else if (!kTextTraits.count(key) && !(envelope && kEnvelope.count(key)) &&
               !key.starts_with("_model_") && !key.starts_with("_view_") && !all_css_inert(value)) {
      keep = false;  // the page keeps the trait's earlier value
    }
    if (keep) {
      ++it;
    } else {
      it = state.erase(it);
      ++cleaned_;
    }
  }
  return "";
}

// ["IPY_MODEL_<id>", "<trait>"]: a link's end, as ipywidgets serializes one.
bool WidgetModels::is_model_reference(const json& value) {
  return value.is_array() && value.size() == 2 && value[0].is_string() && value[1].is_string() &&
         value[0].get_ref<const std::string&>().starts_with("IPY_MODEL_");
}

// A link's end whose values the page may copy anywhere: a trait shown as text (not
// `description`), or the `value` of a model the page was told of whose value is neither markup
// nor typeset.
bool WidgetModels::links_text(const json& end) const {
  auto it = comms_.find(end[0].get_ref<const std::string&>().substr(10));
  if (it == comms_.end() || it->second.kind != TargetKind::widget) return false;
  const std::string& trait = end[1].get_ref<const std::string&>();
  if (trait == "value") return !it->second.value_is_markup && !it->second.value_is_typeset;
  return kTextTraits.count(trait) > 0;
}

// An Output model's outputs, as the page's output area renders them: each one of the four kinds
// an output area knows, its bundle through apply_active_output as a display's would be (with the
// checked models, so a view of one of them still shows); anything else is dropped.
void WidgetModels::check_outputs(json& outputs) {
  for (auto it = outputs.begin(); it != outputs.end();) {
    std::string kind = it->is_object() ? json_field(*it, "output_type", "") : "";
    bool known =
        kind == "stream" || kind == "display_data" || kind == "execute_result" || kind == "error";
    if (!known) {
      it = outputs.erase(it);
      ++cleaned_;
      continue;
    }
    // What apply_active_output withholds it says in the bundle's text/plain, as for a display.
    if (auto data = it->find("data"); data != it->end())
      *data = apply_active_output(*data, mode_, this);
    ++it;
  }
}

// ipywidgets 8's reply to a reloaded page's request_states: {method, states: {model_id:
// {model_name, model_module, model_module_version, state}}, buffer_paths: [[model_id, "state",
// ...]]}. The page rebuilds each model from its entry, so each entry is checked as that model's own
// comm_open and updates were: only models the page was told of as checked widgets, their names
// as a state's `_model_*`, their state with that model's record (an HTML model's value is
// markup). An entry that fails is left out with its buffers; nothing else of the message passes.
std::string WidgetModels::check_update_states(json& data, std::vector<std::string>& buffers) {
  const json states =
      data.contains("states") && data["states"].is_object() ? data["states"] : json::object();
  json paths = data.contains("buffer_paths") ? data["buffer_paths"] : json::array();
  if (!paths.is_array() || paths.size() != buffers.size())
    return "update_states whose buffer_paths are not one path per buffer";
  json kept = json::object();
  for (const auto& [model_id, entry] : states.items()) {
    auto known = comms_.find(model_id);
    if (known == comms_.end() || known->second.kind != TargetKind::widget || !entry.is_object()) {
      ++cleaned_;  // a model the page never had from us: it would build it from this alone
      continue;
    }
    Comm record = known->second;  // kept only if the whole entry passes
    json names = json::object();
    for (const char* key : {"model_name", "model_module", "model_module_version"})
      if (auto it = entry.find(key); it != entry.end()) names[std::string("_") + key] = *it;
    json state =
        entry.contains("state") && entry["state"].is_object() ? entry["state"] : json::object();
    if (!check_state(names, record, false).empty() || !check_state(state, record, false).empty()) {
      ++cleaned_;
      continue;
    }
    known->second = record;
    kept[model_id] = {{"state", std::move(state)}};
    for (const char* key : {"model_name", "model_module", "model_module_version"})
      if (names.contains(std::string("_") + key))
        kept[model_id][key] = names[std::string("_") + key];
  }
  json kept_paths = json::array();
  std::vector<std::string> kept_buffers;
  for (size_t i = 0; i < paths.size(); ++i) {
    const json& path = paths[i];
    bool placed = path.is_array() && path.size() >= 3 && path[0].is_string() &&
                  kept.contains(path[0].get_ref<const std::string&>()) && path[1] == "state" &&
                  is_buffer_place(json(path.begin() + 2, path.end()));
    if (!placed) {
      ++cleaned_;
      continue;
    }
    kept_paths.push_back(path);
    kept_buffers.push_back(std::move(buffers[i]));
  }
  data = {{"method", "update_states"},
          {"states", std::move(kept)},
          {"buffer_paths", std::move(kept_paths)}};
  buffers = std::move(kept_buffers);
  return "";
}

// ipywidgets 6's answer on jupyter.widget.version: {"version": "~2.1.4"}, the version of the
// page's code it expects (Notebook 6's extension compares it, and may show it). Only that key,
// of the form ipywidgets writes.
std::string WidgetModels::check_version(json& data) {
  auto version = data.find("version");
  if (version == data.end() || !version->is_string() ||
      !is_widget_version(version->get_ref<const std::string&>()))
    return "a jupyter.widget.version message whose version is not one";
  if (data.size() > 1) ++cleaned_;
  data = {{"version", *version}};
  return "";
}

std::string WidgetModels::admit(const std::string& type, json& content) {
  std::vector<std::string> none;
  return admit(type, content, none);
}

std::string WidgetModels::admit(const std::string& type, json& content,
                                std::vector<std::string>& buffers) {
  const std::string& comm_id = content["comm_id"].get_ref<const std::string&>();
  auto known = comms_.find(comm_id);
  if (type == "comm_open") {
    const std::string& target = content["target_name"].get_ref<const std::string&>();
    if (mode_ != ActiveOutput::allow && !is_comm_target(target))
      return "a comm whose target name is not a plain name";
    if (known == comms_.end() && comms_.size() >= kMaxComms)
      return "more than " + std::to_string(kMaxComms) + " comms open";
    Comm comm{target, target_kind(target)};
    if (mode_ != ActiveOutput::allow) {
      // The page knows a comm id as one object: a second open of it would replace what the
      // checks decided (a control comm's record, a widget's class).
      if (known != comms_.end()) return "a comm_open for a comm id already open";
      content["target_module"] = nullptr;  // never a module for requirejs to load
      if (auto why = check_shape(type, comm, content["data"], buffers); !why.empty()) return why;
    }
    comms_[comm_id] = std::move(comm);
    return "";
  }
  if (known == comms_.end()) {
    if (mode_ == ActiveOutput::allow) return "";
    return type + " for a comm the page was never told of";
  }
  if (mode_ != ActiveOutput::allow)
    if (auto why = check_shape(type, known->second, content["data"], buffers); !why.empty())
      return why;
  if (type == "comm_close") comms_.erase(known);
  return "";
}

// One message against the table: its row, then that row's check.
std::string WidgetModels::check_shape(const std::string& type, Comm& comm, json& data,
                                      std::vector<std::string>& buffers) {
  if (!data.is_object()) data = json::object();
  if (holds_a_prototype(data)) return type + " with a \"__proto__\" key: the page would inherit it";
  std::string method;
  if (auto it = data.find("method"); type == "comm_msg" && it != data.end()) {
    if (!it->is_string()) return "a comm_msg whose method is not a name";
    method = it->get<std::string>();
  }
  const CommShape* row = find_comm_shape(comm.kind, type, method);
  if (!row)
    return type + (method.empty() ? "" : " (method \"" + method + "\")") + " on " +
           std::string(target_kind_name(comm.kind)) + ": not a message ipywidgets sends there";
  switch (row->check) {
    case ShapeCheck::widget_state: {
      // ipywidgets 6 opens with the state as the data, 7/8 with data.state: both are read; a
      // custom message's content is checked as a state too (no view of ours reads it as code).
      if (auto why = check_buffer_places(data, buffers.size()); !why.empty()) return why;
      for (const char* inner : {"state", "content"})
        if (auto it = data.find(inner); it != data.end() && !it->is_object())
          return std::string("a widget message whose ") + inner + " is not an object";
      if (auto why = check_state(data, comm, true); !why.empty()) return why;
      for (const char* inner : {"state", "content"})
        if (auto it = data.find(inner); it != data.end() && it->is_object())
          if (auto why = check_state(*it, comm, false); !why.empty()) return why;
      return "";
    }
    case ShapeCheck::update_states:
      return check_update_states(data, buffers);
    case ShapeCheck::version:
      return check_version(data);
    case ShapeCheck::nothing:  // a close: the page reads nothing of it
      if (!data.empty() || !buffers.empty()) ++cleaned_;
      data = json::object();
      buffers.clear();
      return "";
    case ShapeCheck::whole_data:
      // Not ipywidgets': every key, the envelope's too, checked as an unnamed model's trait.
      return check_state(data, comm, false);
  }
  return "";
}

void WidgetModels::opened_by_frontend(const std::string& comm_id, const std::string& target) {
  if (comms_.size() < kMaxComms || comms_.count(comm_id))
    comms_[comm_id] = Comm{target, target_kind(target)};
}

std::string WidgetModels::target_of(const std::string& comm_id) const {
  auto it = comms_.find(comm_id);
  return it == comms_.end() ? "" : it->second.target;
}

bool WidgetModels::view_is_checked(const json& view) const {
  if (!view.is_object()) return false;
  std::string id = json_field(view, "model_id", "");
  if (id.empty()) return false;
  auto it = comms_.find(id);
  return it != comms_.end() && it->second.kind == TargetKind::widget;
}

}  // namespace belljar
