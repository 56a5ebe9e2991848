package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

// helm gives up on an include nested deeper than this (a template that
// includes itself).
const maxIncludeDepth = 1000

// A `required` failure carries these markers so that the error printed is
// the template's own message and location, not Go's whole call chain.
const (
	requiredStart = "HELM_ERR_START"
	requiredEnd   = "HELM_ERR_END"
)

var requiredMessage = regexp.MustCompile(requiredStart + `(.*)` + requiredEnd)

// toYAML marshals through JSON, as sigs.k8s.io/yaml does for helm, so keys
// come out sorted and numbers as JSON numbers; errors render as "".
func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// fromYAML and fromJSON put a parse error under "Error" instead of failing,
// which is what charts written against helm expect.
func fromYAML(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

// required fails on nil and on the empty string only: false and 0 are
// values a user chose.
func required(message string, value interface{}) (interface{}, error) {
	if value == nil {
		return value, errors.New(requiredStart + message + requiredEnd)
	}
	if text, ok := value.(string); ok && text == "" {
		return value, errors.New(requiredStart + message + requiredEnd)
	}
	return value, nil
}

// renderer holds one set of parsed templates: a chart's, or a chart's plus
// the text handed to tpl.
type renderer struct {
	sources map[string]string // every template, so tpl can reach the chart's defines
	depth   map[string]int
}

func (r *renderer) funcMap(set *template.Template) template.FuncMap {
	funcs := sprig.TxtFuncMap()
	// helm removes these: a chart must not read the machine it is rendered on.
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["required"] = required
	// Offline, as `helm template` is: lookup finds nothing.
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		if r.depth[name] > maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		r.depth[name]++
		defer func() { r.depth[name]-- }()
		var out strings.Builder
		err := set.ExecuteTemplate(&out, name, data)
		return out.String(), err
	}
	funcs["tpl"] = func(text string, top map[string]interface{}) (string, error) {
		current, _ := top["Template"].(map[string]interface{})
		name, _ := current["Name"].(string)
		basePath, _ := current["BasePath"].(string)
		if name == "" {
			return "", fmt.Errorf("cannot retrieve Template.Name from values inside tpl function: %s", text)
		}
		sources := map[string]string{}
		for source, body := range r.sources {
			sources[source] = body
		}
		sources[name] = text
		nested := &renderer{sources: sources, depth: r.depth}
		out, err := nested.execute(name, top, basePath)
		if err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return out, nil
	}
	return funcs
}

// parse builds one template set holding every source, in helm's order
// (shallower paths first, then by name), with missing keys rendering empty.
func (r *renderer) parse() (*template.Template, error) {
	set := template.New("gotpl").Option("missingkey=zero")
	set.Funcs(r.funcMap(set))
	names := make([]string, 0, len(r.sources))
	for name := range r.sources {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		di, dj := strings.Count(names[i], "/"), strings.Count(names[j], "/")
		if di != dj {
			return di > dj
		}
		return names[i] > names[j]
	})
	for _, name := range names {
		if _, err := set.New(name).Parse(r.sources[name]); err != nil {
			return nil, cleanupParseError(name, err)
		}
	}
	return set, nil
}

func (r *renderer) execute(name string, top map[string]interface{}, basePath string) (string, error) {
	set, err := r.parse()
	if err != nil {
		return "", err
	}
	scope := map[string]interface{}{}
	for key, value := range top {
		scope[key] = value
	}
	scope["Template"] = map[string]interface{}{"Name": name, "BasePath": basePath}
	var out strings.Builder
	if err := set.ExecuteTemplate(&out, name, scope); err != nil {
		return "", cleanupExecError(name, err)
	}
	// missingkey=zero still prints "<no value>" for a missing map key of
	// interface type; helm removes it.
	return strings.ReplaceAll(out.String(), "<no value>", ""), nil
}

// renderTemplates renders every template whose file name does not start
// with "_" (those hold defines only).
func renderTemplates(sources map[string]string, top map[string]interface{}, basePath string) (map[string]string, error) {
	r := &renderer{sources: sources, depth: map[string]int{}}
	out := map[string]string{}
	for name := range sources {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		text, err := r.execute(name, top, basePath)
		if err != nil {
			return nil, err
		}
		out[name] = text
	}
	return out, nil
}

func cleanupParseError(name string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %s", name, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

// cleanupExecError shortens Go's "template: FILE:L:C: executing ... error
// calling fail: MESSAGE" to helm's "execution error at (FILE:L:C): MESSAGE".
func cleanupExecError(name string, err error) error {
	var execError template.ExecError
	if !errors.As(err, &execError) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %s", name, err)
	}
	if parts := requiredMessage.FindStringSubmatch(tokens[2]); len(parts) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], parts[1])
	}
	if at := strings.LastIndex(tokens[2], "error calling fail: "); at >= 0 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], tokens[2][at+len("error calling fail: "):])
	}
	return err
}

// files is .Files: every chart file outside templates/ and the chart's own
// metadata, read by path relative to the chart root.
type files map[string][]byte

func (f files) Get(name string) string { return string(f[name]) }

func (f files) GetBytes(name string) []byte { return f[name] }

func (f files) Glob(pattern string) files {
	out := files{}
	for name, data := range f {
		if matched, _ := path.Match(pattern, name); matched {
			out[name] = data
		}
	}
	return out
}

func (f files) Lines(name string) []string {
	text := f.Get(name)
	if text == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

func (f files) sortedNames() []string {
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// AsConfig is the files as ConfigMap data, keyed by base name.
func (f files) AsConfig() string {
	data := map[string]string{}
	for _, name := range f.sortedNames() {
		data[path.Base(name)] = string(f[name])
	}
	return toYAML(data)
}

// AsSecrets is the files as Secret data, base64-encoded, keyed by base name.
func (f files) AsSecrets() string {
	data := map[string]string{}
	for _, name := range f.sortedNames() {
		data[path.Base(name)] = base64.StdEncoding.EncodeToString(f[name])
	}
	return toYAML(data)
}

// capabilities is .Capabilities: the cluster a chart is rendered for.
type capabilities struct {
	KubeVersion kubeVersion
	APIVersions apiVersions
	HelmVersion map[string]string
}

type kubeVersion struct {
	Version string // "v1.29.0"
	Major   string
	Minor   string
}

func (k kubeVersion) String() string { return k.Version }

// GitVersion is kept for charts written against helm 2.
func (k kubeVersion) GitVersion() string { return k.Version }

type apiVersions []string

// Has matches "group/version" or "group/version/Kind".
func (a apiVersions) Has(version string) bool {
	for _, known := range a {
		if known == version {
			return true
		}
	}
	return false
}

// The built-in APIs of a current cluster, the part of helm's default set a
// chart for one Deployment can sensibly ask about.
var builtinAPIVersions = []string{
	"v1",
	"apps/v1",
	"autoscaling/v1",
	"autoscaling/v2",
	"batch/v1",
	"policy/v1",
	"networking.k8s.io/v1",
	"rbac.authorization.k8s.io/v1",
	"storage.k8s.io/v1",
	"coordination.k8s.io/v1",
	"discovery.k8s.io/v1",
	"apiextensions.k8s.io/v1",
}

func newCapabilities(version string, extra []string) (capabilities, error) {
	parsed, err := semver.NewVersion(version)
	if err != nil {
		return capabilities{}, fmt.Errorf("--kube-version %q: %w", version, err)
	}
	versions := append(apiVersions{}, builtinAPIVersions...)
	versions = append(versions, extra...)
	return capabilities{
		KubeVersion: kubeVersion{
			Version: "v" + parsed.String(),
			Major:   fmt.Sprint(parsed.Major()),
			Minor:   fmt.Sprint(parsed.Minor()),
		},
		APIVersions: versions,
		HelmVersion: map[string]string{"Version": "v3"},
	}, nil
}
