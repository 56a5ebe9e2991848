package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver"
	"github.com/ghodss/yaml"
	"github.com/xeipuuv/gojsonschema"
)

// helm's DefaultCapabilities follow the Kubernetes client it was built
// with; a recent release is the useful default for checking a chart.
const defaultKubeVersion = "v1.29.0"

type renderOptions struct {
	chartDir         string
	valuesFiles      []string
	sets             []string
	setFiles         []string // "key.path=FILE": the file's text, as a string
	releaseName      string
	namespace        string
	kubeVersion      string
	extraAPIVersions []string
}

type manifest struct {
	source  string // "CHART/templates/FILE"
	content string
}

type renderResult struct {
	manifests []manifest
	notes     string
}

// A loaded chart directory, split the way helm's loader splits it.
type chart struct {
	metadata  map[string]interface{} // Chart.yaml under helm's Go field names
	name      string
	version   string
	kubeRange string
	values    map[string]interface{}
	schema    []byte            // nil without values.schema.json
	templates map[string]string // "CHART/templates/FILE" -> text
	files     map[string][]byte // everything else, for .Files
}

// Chart.yaml keys whose helm Go field name is not the key with its first
// letter upper-cased.
var metadataFieldNames = map[string]string{
	"apiVersion":  "APIVersion",
	"kubeVersion": "KubeVersion",
}

func loadChart(dir string) (*chart, error) {
	c := &chart{templates: map[string]string{}, files: map[string][]byte{}}
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("Chart.yaml file is missing: %w", err)
	}
	raw := map[string]interface{}{}
	if err := yaml.Unmarshal(chartYAML, &raw); err != nil {
		return nil, fmt.Errorf("cannot load Chart.yaml: %w", err)
	}
	c.metadata = map[string]interface{}{}
	for key, value := range raw {
		field, ok := metadataFieldNames[key]
		if !ok {
			field = strings.ToUpper(key[:1]) + key[1:]
		}
		c.metadata[field] = value
	}
	c.name, _ = raw["name"].(string)
	c.version, _ = raw["version"].(string)
	c.kubeRange, _ = raw["kubeVersion"].(string)
	if c.name == "" {
		return nil, fmt.Errorf("validation: chart.metadata.name is required")
	}
	if _, err := semver.StrictNewVersion(c.version); err != nil {
		return nil, fmt.Errorf("validation: chart.metadata.version %q is invalid", c.version)
	}

	c.values = map[string]interface{}{}
	if text, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if err := yaml.Unmarshal(text, &c.values); err != nil {
			return nil, fmt.Errorf("cannot load values.yaml: %w", err)
		}
	}
	if text, err := os.ReadFile(filepath.Join(dir, "values.schema.json")); err == nil {
		c.schema = text
	}

	err = filepath.Walk(dir, func(file string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		relative, _ := filepath.Rel(dir, file)
		relative = filepath.ToSlash(relative)
		if info.IsDir() {
			if relative == "charts" {
				return fmt.Errorf("subcharts (charts/) are not supported by this renderer")
			}
			return nil
		}
		switch relative {
		case "Chart.yaml", "values.yaml", "values.schema.json", "Chart.lock", ".helmignore":
			return nil
		}
		text, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if strings.HasPrefix(relative, "templates/") {
			c.templates[path.Join(c.name, relative)] = string(text)
		} else {
			c.files[relative] = text
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// coalesce lays `over` onto `base` as helm does: maps merge key by key, a
// null deletes the key, anything else replaces.
func coalesce(base, over map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for key, value := range base {
		out[key] = value
	}
	for key, value := range over {
		if value == nil {
			delete(out, key)
			continue
		}
		overMap, overIsMap := value.(map[string]interface{})
		baseMap, baseIsMap := out[key].(map[string]interface{})
		if overIsMap && baseIsMap {
			out[key] = coalesce(baseMap, overMap)
		} else {
			out[key] = value
		}
	}
	return out
}

var setIntPattern = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

// setValue types a --set value the way helm's strvals does for the cases
// tests use: true/false, null, integers, otherwise a string.
func setValue(text string) interface{} {
	switch text {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if setIntPattern.MatchString(text) {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n
		}
	}
	return text
}

// parseSet turns "a.b.c=v" into {a: {b: {c: v}}}.
func parseSet(assignment string) (map[string]interface{}, error) {
	equals := strings.IndexByte(assignment, '=')
	if equals <= 0 {
		return nil, fmt.Errorf("failed parsing --set data: key %q has no value", assignment)
	}
	keys := strings.Split(assignment[:equals], ".")
	var value interface{} = setValue(assignment[equals+1:])
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i] == "" {
			return nil, fmt.Errorf("failed parsing --set data: empty key in %q", assignment)
		}
		value = map[string]interface{}{keys[i]: value}
	}
	return value.(map[string]interface{}), nil
}

// parseSetFile turns "a.b=FILE" into {a: {b: FILE's text}}: always a
// string, never typed, as helm's --set-file reads it.
func parseSetFile(assignment string) (map[string]interface{}, error) {
	equals := strings.IndexByte(assignment, '=')
	if equals <= 0 {
		return nil, fmt.Errorf("failed parsing --set-file data: key %q has no value", assignment)
	}
	text, err := os.ReadFile(assignment[equals+1:])
	if err != nil {
		return nil, fmt.Errorf("failed parsing --set-file data: %w", err)
	}
	parsed, err := parseSet(assignment[:equals] + "=")
	if err != nil {
		return nil, err
	}
	// parseSet typed the empty value as a string; put the text in its place.
	keys := strings.Split(assignment[:equals], ".")
	node := parsed
	for _, key := range keys[:len(keys)-1] {
		node = node[key].(map[string]interface{})
	}
	node[keys[len(keys)-1]] = string(text)
	return parsed, nil
}

// validateValues checks the coalesced values against values.schema.json,
// with the message helm prints.
func validateValues(c *chart, values map[string]interface{}) error {
	if c.schema == nil {
		return nil
	}
	// helm validates the values as JSON, so Go types never matter.
	asJSON, err := json.Marshal(values)
	if err != nil {
		return err
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(c.schema),
		gojsonschema.NewBytesLoader(asJSON))
	if err != nil {
		return fmt.Errorf("values.schema.json: %w", err)
	}
	if result.Valid() {
		return nil
	}
	var problems strings.Builder
	for _, problem := range result.Errors() {
		fmt.Fprintf(&problems, "- %s\n", problem)
	}
	return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s",
		c.name, problems.String())
}

// checkKubeVersion refuses a cluster version outside Chart.yaml's
// kubeVersion range, as helm install and helm template do.
func checkKubeVersion(c *chart, kubeVersion string) error {
	if c.kubeRange == "" {
		return nil
	}
	constraint, err := semver.NewConstraint(c.kubeRange)
	if err != nil {
		return fmt.Errorf("Chart.yaml kubeVersion %q: %w", c.kubeRange, err)
	}
	version, err := semver.NewVersion(kubeVersion)
	if err != nil {
		return fmt.Errorf("--kube-version %q: %w", kubeVersion, err)
	}
	if !constraint.Check(version) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
			c.kubeRange, kubeVersion)
	}
	return nil
}

// Manifests split on document separators the way helm's releaseutil does.
var documentSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

// apiHead is what helm reads from every manifest to order and name it.
type apiHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   *struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func splitManifests(source, text string) ([]manifest, error) {
	var out []manifest
	for _, document := range documentSeparator.Split(text, -1) {
		if strings.TrimSpace(document) == "" {
			continue
		}
		var head apiHead
		if err := yaml.Unmarshal([]byte(document), &head); err != nil {
			return nil, fmt.Errorf("YAML parse error on %s: %w", source, err)
		}
		// A document of comments only is dropped by kubectl; helm keeps it.
		out = append(out, manifest{source: source, content: strings.TrimSpace(document)})
	}
	return out, nil
}

func renderChart(options renderOptions) (*renderResult, error) {
	c, err := loadChart(options.chartDir)
	if err != nil {
		return nil, err
	}
	if err := checkKubeVersion(c, options.kubeVersion); err != nil {
		return nil, err
	}
	user := map[string]interface{}{}
	for _, file := range options.valuesFiles {
		text, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		parsed := map[string]interface{}{}
		if err := yaml.Unmarshal(text, &parsed); err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", file, err)
		}
		user = mergeUserValues(user, parsed)
	}
	for _, assignment := range options.sets {
		parsed, err := parseSet(assignment)
		if err != nil {
			return nil, err
		}
		user = mergeUserValues(user, parsed)
	}
	// After --set, as helm merges them: --set-file wins over both.
	for _, assignment := range options.setFiles {
		parsed, err := parseSetFile(assignment)
		if err != nil {
			return nil, err
		}
		user = mergeUserValues(user, parsed)
	}
	values := coalesce(c.values, user)
	if err := validateValues(c, values); err != nil {
		return nil, err
	}

	capabilities, err := newCapabilities(options.kubeVersion, options.extraAPIVersions)
	if err != nil {
		return nil, err
	}
	top := map[string]interface{}{
		"Values": values,
		"Chart":  c.metadata,
		"Release": map[string]interface{}{
			"Name":      options.releaseName,
			"Namespace": options.namespace,
			"Service":   "Helm",
			"Revision":  1,
			"IsInstall": true,
			"IsUpgrade": false,
		},
		"Capabilities": capabilities,
		"Files":        files(c.files),
	}
	rendered, err := renderTemplates(c.templates, top, c.name+"/templates")
	if err != nil {
		return nil, err
	}

	result := &renderResult{}
	var sources []string
	for source := range rendered {
		sources = append(sources, source)
	}
	sort.Strings(sources)
	for _, source := range sources {
		if path.Base(source) == "NOTES.txt" {
			result.notes = rendered[source]
			continue
		}
		documents, err := splitManifests(source, rendered[source])
		if err != nil {
			return nil, err
		}
		result.manifests = append(result.manifests, documents...)
	}
	return result, nil
}

// mergeUserValues merges values given on the command line; unlike coalesce
// a null is kept, so that it can delete a chart default afterwards.
func mergeUserValues(base, over map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for key, value := range base {
		out[key] = value
	}
	for key, value := range over {
		overMap, overIsMap := value.(map[string]interface{})
		baseMap, baseIsMap := out[key].(map[string]interface{})
		if overIsMap && baseIsMap {
			out[key] = mergeUserValues(baseMap, overMap)
		} else {
			out[key] = value
		}
	}
	return out
}
