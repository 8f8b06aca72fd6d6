// Package crdtest loads the chart's CRDs for envtest suites, optionally
// without some CEL rules. It exists for one rule: the temporary
// "spec.tls is not supported yet" rule keeps TLS unexposed on main until its
// e2e tests exist, while the envtest suites must still check every other
// TLS rule against a real API server. When that rule is deleted from
// api/v1alpha1, TLSNotSupportedYet and its uses go with it.
package crdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TLSNotSupportedYet is the message of the temporary rule on
// EtcdClusterSpec that refuses spec.tls altogether.
const TLSNotSupportedYet = "spec.tls is not supported yet"

// Load reads every CRD in dir and removes the CEL rules whose message is one
// of drop, wherever in a schema they are. It reports how many it removed,
// so a suite can tell a rule that is gone from one it failed to find.
func Load(dir string, drop ...string) ([]*apiextensionsv1.CustomResourceDefinition, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, 0, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	removed := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, 0, fmt.Errorf("failed to decode %s: %w", f, err)
		}
		for i := range crd.Spec.Versions {
			if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
				removed += dropRules(s.OpenAPIV3Schema, drop)
			}
		}
		out = append(out, crd)
	}
	return out, removed, nil
}

func dropRules(s *apiextensionsv1.JSONSchemaProps, drop []string) int {
	if s == nil {
		return 0
	}
	before := len(s.XValidations)
	s.XValidations = slices.DeleteFunc(s.XValidations, func(r apiextensionsv1.ValidationRule) bool {
		return slices.Contains(drop, r.Message)
	})
	n := before - len(s.XValidations)
	for k, p := range s.Properties {
		n += dropRules(&p, drop)
		s.Properties[k] = p
	}
	if s.Items != nil {
		n += dropRules(s.Items.Schema, drop)
	}
	if s.AdditionalProperties != nil {
		n += dropRules(s.AdditionalProperties.Schema, drop)
	}
	return n
}
