package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeChart lays out a chart in a temporary directory: files maps a path
// relative to the chart root to its contents; Chart.yaml is added.
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\n"}
	for name, text := range files {
		all[name] = text
	}
	for name, text := range all {
		file := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// renderOne renders the chart and returns templates/t.yaml's text.
func renderOne(t *testing.T, dir string, sets ...string) string {
	t.Helper()
	result, err := renderChart(renderOptions{chartDir: dir, sets: sets, releaseName: "rel",
		namespace: "ns", kubeVersion: defaultKubeVersion})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var out []string
	for _, m := range result.manifests {
		if m.source == "demo/templates/t.yaml" {
			out = append(out, m.content)
		}
	}
	return strings.Join(out, "\n---\n")
}

func renderError(t *testing.T, dir string, sets ...string) string {
	t.Helper()
	_, err := renderChart(renderOptions{chartDir: dir, sets: sets, releaseName: "rel",
		namespace: "ns", kubeVersion: defaultKubeVersion})
	if err == nil {
		t.Fatal("render succeeded; want an error")
	}
	return err.Error()
}

func expectEqual(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestBuiltInObjects(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"templates/t.yaml": "a: {{ .Chart.Name }}-{{ .Chart.Version }}-{{ .Chart.AppVersion }}\n" +
			"b: {{ .Release.Name }}/{{ .Release.Namespace }}/{{ .Release.Service }}\n" +
			"c: {{ .Template.Name }} {{ .Template.BasePath }}\n" +
			"d: {{ .Capabilities.KubeVersion.Major }}.{{ .Capabilities.KubeVersion.Minor }}\n",
	})
	expectEqual(t, renderOne(t, dir),
		"a: demo-1.2.3-4.5\nb: rel/ns/Helm\nc: demo/templates/t.yaml demo/templates\nd: 1.29")
}

func TestValuesAreJSONTypedAsInHelm(t *testing.T) {
	// helm reads values through JSON: every number is a float64, so a large
	// integer prints in exponent form unless the chart converts it.
	dir := writeChart(t, map[string]string{
		"values.yaml":      "small: 1\nbig: 1000000\n",
		"templates/t.yaml": "a: {{ .Values.small }}\nb: {{ .Values.big }}\nc: {{ int .Values.big }}\nd: {{ .Values.missing }}\n",
	})
	expectEqual(t, renderOne(t, dir), "a: 1\nb: 1e+06\nc: 1000000\nd:")
}

func TestUserValuesCoalesceOverDefaults(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":      "m:\n  keep: 1\n  drop: 2\n  over: x\n",
		"templates/t.yaml": "{{ toYaml .Values.m }}\n",
	})
	expectEqual(t, renderOne(t, dir, "m.drop=null", "m.over=true", "m.added=7"),
		"added: 7\nkeep: 1\nover: true")
}

func TestSetFileSetsTheFilesTextAsAStringOverSet(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":      "m:\n  text: default\n",
		"templates/t.yaml": "a: {{ .Values.m.text | quote }}\nb: {{ kindOf .Values.m.number }}\n",
	})
	text := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(text, []byte("rules:\n  - x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	number := filepath.Join(t.TempDir(), "n")
	if err := os.WriteFile(number, []byte("42"), 0o644); err != nil {
		t.Fatal(err)
	}
	result, err := renderChart(renderOptions{chartDir: dir, sets: []string{"m.text=from-set"},
		setFiles: []string{"m.text=" + text, "m.number=" + number}, releaseName: "rel",
		namespace: "ns", kubeVersion: defaultKubeVersion})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	expectEqual(t, result.manifests[0].content, "a: \"rules:\\n  - x\\n\"\nb: string")
	_, err = renderChart(renderOptions{chartDir: dir, setFiles: []string{"m.text=" + dir + "/absent"},
		releaseName: "rel", namespace: "ns", kubeVersion: defaultKubeVersion})
	if err == nil || !strings.Contains(err.Error(), "failed parsing --set-file data") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestToYamlSortsKeysAndDropsTheTrailingNewline(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":      "r:\n  requests:\n    memory: 1Gi\n    cpu: 1\n  l: [a, b]\n",
		"templates/t.yaml": "x:\n  {{- toYaml .Values.r | nindent 2 }}\ny: {{ toYaml (dict) }}\n",
	})
	expectEqual(t, renderOne(t, dir), "x:\n  l:\n  - a\n  - b\n  requests:\n    cpu: 1\n    memory: 1Gi\ny: {}")
}

func TestFromYamlReportsParseErrorsUnderError(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"templates/t.yaml": "{{ $ok := fromYaml \"a: 1\" }}a: {{ $ok.a }}\n" +
			"{{ $bad := fromYaml \"a: [\" }}bad: {{ if $bad.Error }}yes{{ end }}\n",
	})
	expectEqual(t, renderOne(t, dir), "a: 1\nbad: yes")
}

func TestIncludeAndTplReachTheChartsDefines(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"templates/_helpers.tpl": "{{- define \"demo.name\" -}}{{ .Release.Name }}-demo{{- end }}",
		"values.yaml":            "greeting: \"hello {{ include \\\"demo.name\\\" . }}\"\n",
		"templates/t.yaml":       "a: {{ include \"demo.name\" . | upper }}\nb: {{ tpl .Values.greeting . }}\n",
	})
	expectEqual(t, renderOne(t, dir), "a: REL-DEMO\nb: hello rel-demo")
}

func TestRequiredFailsOnNilAndEmptyOnly(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":      "flag: false\nname: \"\"\n",
		"templates/t.yaml": "a: {{ required \"flag is required\" .Values.flag }}\nb: {{ required \"name is required\" .Values.name }}\n",
	})
	expectEqual(t, renderError(t, dir),
		"execution error at (demo/templates/t.yaml:2:6): name is required")
	expectEqual(t, renderOne(t, dir, "name=x"), "a: false\nb: x")
}

func TestFailNamesTheTemplateAndTheMessage(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"templates/_helpers.tpl": "{{- define \"demo.check\" -}}{{ fail \"no way\" }}{{- end }}",
		"templates/t.yaml":       "{{ include \"demo.check\" . }}\n",
	})
	msg := renderError(t, dir)
	if !strings.HasPrefix(msg, "execution error at (demo/templates/t.yaml:1:3): ") ||
		!strings.HasSuffix(msg, "no way") {
		t.Errorf("got %q", msg)
	}
}

func TestFilesAndCapabilities(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"files/a.txt": "one\ntwo\n",
		"templates/t.yaml": "a: {{ .Files.Get \"files/a.txt\" | quote }}\n" +
			"b: {{ .Files.Get \"templates/t.yaml\" | quote }}\n" +
			"c: {{ .Files.Get \"values.yaml\" | quote }}\n" +
			"d: {{ len (.Files.Lines \"files/a.txt\") }}\n" +
			"e: {{ .Capabilities.APIVersions.Has \"apps/v1\" }} {{ .Capabilities.APIVersions.Has \"monitoring.coreos.com/v1\" }}\n",
	})
	expectEqual(t, renderOne(t, dir), "a: \"one\\ntwo\\n\"\nb: \"\"\nc: \"\"\nd: 2\ne: true false")
	result, err := renderChart(renderOptions{chartDir: dir, releaseName: "r", namespace: "n",
		kubeVersion: defaultKubeVersion, extraAPIVersions: []string{"monitoring.coreos.com/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(result.manifests[0].content, "e: true true") {
		t.Errorf("--api-versions not seen: %s", result.manifests[0].content)
	}
}

func TestEnvIsNotAvailable(t *testing.T) {
	dir := writeChart(t, map[string]string{"templates/t.yaml": "a: {{ env \"HOME\" }}\n"})
	if msg := renderError(t, dir); !strings.Contains(msg, `function "env" not defined`) {
		t.Errorf("got %q", msg)
	}
}

func TestSchemaAndKubeVersionAreChecked(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"values.yaml":        "n: 1\n",
		"values.schema.json": `{"type": "object", "properties": {"n": {"type": "integer"}}}`,
		"templates/t.yaml":   "n: {{ .Values.n }}\n",
	})
	expectEqual(t, renderOne(t, dir, "n=2"), "n: 2")
	msg := renderError(t, dir, "n=two")
	if !strings.Contains(msg, "values don't meet the specifications of the schema(s)") ||
		!strings.Contains(msg, "- n: Invalid type. Expected: integer, given: string") {
		t.Errorf("got %q", msg)
	}

	old := writeChart(t, map[string]string{
		"Chart.yaml":       "apiVersion: v2\nname: demo\nversion: 1.0.0\nkubeVersion: \">=1.30.0-0\"\n",
		"templates/t.yaml": "a: 1\n",
	})
	if msg := renderError(t, old); !strings.Contains(msg, "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.0") {
		t.Errorf("got %q", msg)
	}
}

func TestManifestsSplitAndMustParse(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"templates/t.yaml": "a: 1\n---\n# comment only\n---\n\n---\nb: 2\n",
	})
	result, err := renderChart(renderOptions{chartDir: dir, releaseName: "r", namespace: "n", kubeVersion: defaultKubeVersion})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.manifests) != 3 {
		t.Errorf("got %d documents, want 3 (the blank one dropped): %+v", len(result.manifests), result.manifests)
	}
	broken := writeChart(t, map[string]string{"templates/t.yaml": "a: [1\n"})
	if msg := renderError(t, broken); !strings.HasPrefix(msg, "YAML parse error on demo/templates/t.yaml") {
		t.Errorf("got %q", msg)
	}
}
