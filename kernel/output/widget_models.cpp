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

constexpr std::string_view kWidgetTarget = "jupyter.widget";
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
const std::set<std::string, std::less<>> kEnvelope = {"state", "method", "buffers", "buffer_paths",
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

// Markup as html_sanitizer re-serializes it: the active parts (and active TeX) removed.
std::string inert_markup(const std::string& markup, size_t& cleaned) {
  if (markup.find_first_of("<&$\\") == std::string::npos) return markup;  // plain text
  // The page puts the value in with innerHTML: its styles are kept to a box of its own.
  std::string scope = style_scope();
  MarkupVerdict verdict = check_markup(markup, MarkupKind::html, scope);
  if (!verdict.inert) ++cleaned;
  return verdict.styled ? contained_markup(verdict.canonical, scope) : verdict.canonical;
}

}  // namespace

std::string WidgetModels::check_state(json& state, Comm& comm) {
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
    } else if (key == "outputs" && value.is_array()) {
      // An Output model's (ipywidgets 7/8) outputs are outputs like any other.
      for (json& output : value)
        if (output.is_object())
          if (auto data = output.find("data"); data != output.end())
            *data = apply_active_output(*data, mode_);
    } else if (key == "format" && value.is_string() &&
               value.get_ref<const std::string&>() == "url") {
      keep = false;  // Image/Video/Audio: the value would be a URL for the browser to fetch
    } else if (!kTextTraits.count(key) && !kEnvelope.count(key) && !key.starts_with("_model_") &&
               !key.starts_with("_view_") && !all_css_inert(value)) {
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

std::string WidgetModels::admit(const std::string& type, json& content) {
  const std::string& comm_id = content["comm_id"].get_ref<const std::string&>();
  auto known = comms_.find(comm_id);
  if (type == "comm_open") {
    const std::string& target = content["target_name"].get_ref<const std::string&>();
    if (mode_ != ActiveOutput::allow && !is_comm_target(target))
      return "a comm whose target name is not a plain name";
    if (known == comms_.end() && comms_.size() >= kMaxComms)
      return "more than " + std::to_string(kMaxComms) + " comms open";
    Comm comm{target, target == kWidgetTarget};
    if (mode_ != ActiveOutput::allow) {
      content["target_module"] = nullptr;  // never a module for requirejs to load
      json& data = content["data"];
      // ipywidgets 6 opens with the state as the data, 7/8 with data.state: both are read.
      if (comm.widget) {
        if (auto why = check_state(data, comm); !why.empty()) return why;
        if (auto state = data.find("state"); state != data.end() && state->is_object())
          if (auto why = check_state(*state, comm); !why.empty()) return why;
      }
    }
    comms_[comm_id] = std::move(comm);
    return "";
  }
  if (known == comms_.end()) {
    if (mode_ == ActiveOutput::allow) return "";
    return type + " for a comm the page was never told of";
  }
  if (type == "comm_close") {
    comms_.erase(known);
    return "";
  }
  if (mode_ != ActiveOutput::allow && known->second.widget) {
    json& data = content["data"];
    // An update (and the reply to a reloaded page's request_state) carries data.state.
    if (auto state = data.find("state"); state != data.end() && state->is_object())
      if (auto why = check_state(*state, known->second); !why.empty()) return why;
    if (auto why = check_state(data, known->second); !why.empty()) return why;
  }
  return "";
}

void WidgetModels::opened_by_frontend(const std::string& comm_id, const std::string& target) {
  if (comms_.size() < kMaxComms || comms_.count(comm_id))
    comms_[comm_id] = Comm{target, target == kWidgetTarget};
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
  return it != comms_.end() && it->second.widget;
}

}  // namespace belljar
