// helm_render renders a chart the way `helm template` does, for tests on
// machines where helm cannot be installed: Go's text/template with sprig,
// helm's own functions (include, tpl, required, toYaml, fromYaml, toJson,
// fromJson), the .Values / .Chart / .Release / .Capabilities / .Files /
// .Template objects, values.schema.json validation and Chart.yaml's
// kubeVersion check. It builds from Debian's Go packages alone (GOPATH mode,
// no module downloads).
//
// Usage:
//
//	helm_render --chart DIR [--values FILE]... [--set key.path=value]...
//	    [--set-file key.path=FILE]...
//	    [--release-name NAME] [--namespace NS] [--kube-version vX.Y.Z]
//	    [--api-versions GROUP/VERSION]... [--notes]
//
// On success it prints every non-empty manifest as `helm template` does
// ("---\n# Source: CHART/templates/FILE\n..."), or with --notes only the
// rendered NOTES.txt; on failure it prints "Error: ..." to stderr and exits 1.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

type repeatedFlag []string

func (r *repeatedFlag) String() string     { return strings.Join(*r, ",") }
func (r *repeatedFlag) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var options renderOptions
	var valuesFiles, sets, setFiles, apiVersions repeatedFlag
	flag.StringVar(&options.chartDir, "chart", "", "chart directory")
	flag.Var(&valuesFiles, "values", "values YAML file (repeatable; later files win)")
	flag.Var(&sets, "set", "key.path=value, typed as helm --set types it (repeatable; wins over files)")
	flag.Var(&setFiles, "set-file", "key.path=FILE, the file's text as a string (repeatable; wins over --set)")
	flag.StringVar(&options.releaseName, "release-name", "release-name", ".Release.Name")
	flag.StringVar(&options.namespace, "namespace", "default", ".Release.Namespace")
	flag.StringVar(&options.kubeVersion, "kube-version", defaultKubeVersion, ".Capabilities.KubeVersion")
	flag.Var(&apiVersions, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	flag.Parse()
	if options.chartDir == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: helm_render --chart DIR [--values FILE]... [--set k=v]... [--set-file k=FILE]... [--notes]")
		os.Exit(2)
	}
	options.valuesFiles = valuesFiles
	options.sets = sets
	options.setFiles = setFiles
	options.extraAPIVersions = apiVersions

	result, err := renderChart(options)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(1)
	}
	if *notes {
		fmt.Print(result.notes)
		return
	}
	for _, manifest := range result.manifests {
		fmt.Printf("---\n# Source: %s\n%s\n", manifest.source, manifest.content)
	}
}
