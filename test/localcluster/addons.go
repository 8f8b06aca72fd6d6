package localcluster

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

//go:embed addons/*.yaml
var addonFS embed.FS

type addonValues struct {
	ClusterDomain  string
	DNSServiceIP   string
	CoreDNSImage   string
	LocalPathImage string
	ToolsImage     string
	// StoragePathMap is the provisioner's config.json: one volume directory
	// per node and none for any other node, so a volume is always on the
	// disk of the node its Pod was scheduled to.
	StoragePathMap string
	// SecondStorageClass names the class of addons/local-path-second.yaml.
	SecondStorageClass string
	// NetworkPolicyUser is the NetworkPolicy enforcer's identity.
	NetworkPolicyUser string
}

func (l Layout) storagePathMap(nodes []Node) (string, error) {
	type nodePath struct {
		Node  string   `json:"node"`
		Paths []string `json:"paths"`
	}
	var cfg struct {
		NodePathMap []nodePath `json:"nodePathMap"`
	}
	for _, n := range nodes {
		cfg.NodePathMap = append(cfg.NodePathMap, nodePath{Node: n.Name, Paths: []string{l.NodeStorageDir(n)}})
	}
	data, err := json.Marshal(cfg)
	return string(data), err
}

// applyAddons server-side-applies CoreDNS, the storage provisioner and the
// NetworkPolicy enforcer's access.
func applyAddons(ctx context.Context, cfg *rest.Config, values addonValues) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	values.SecondStorageClass = SecondStorageClass
	values.NetworkPolicyUser = networkPolicyUser
	for _, file := range []string{"addons/coredns.yaml", "addons/local-path.yaml", "addons/local-path-second.yaml", "addons/network-policy.yaml"} {
		objs, err := renderManifest(file, values)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("localcluster"), client.ForceOwnership); err != nil {
				return fmt.Errorf("failed to apply %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
		}
	}
	return nil
}

func renderManifest(file string, values any) ([]*unstructured.Unstructured, error) {
	raw, err := addonFS.ReadFile(file)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New(file).Option("missingkey=error").Parse(string(raw))
	if err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", file, err)
	}
	var rendered bytes.Buffer
	if err := tmpl.Execute(&rendered, values); err != nil {
		return nil, fmt.Errorf("failed to render %s: %w", file, err)
	}
	return DecodeManifests(rendered.Bytes())
}

// DecodeManifests splits a multi-document YAML stream into objects.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("failed to decode manifest: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
