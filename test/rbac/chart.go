package rbac

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Render runs the pinned Helm's template on the chart in the module at root,
// as release in namespace, with extra arguments, and decodes every object.
func Render(root, release, namespace string, args ...string) ([]*unstructured.Unstructured, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	helm := append([]string{"tool", "-modfile=" + filepath.Join(root, "hack", "tools", "helm", "go.mod"), "helm",
		"template", release, filepath.Join(root, "charts", "etcd-operator"), "--namespace", namespace}, args...)
	cmd := exec.Command("go", helm...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template: %w\n%s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding the rendered chart: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// Grant is a permission and the namespace it holds in ("" cluster-wide).
type Grant struct {
	Namespace string
	Permission
}

func (g Grant) String() string {
	if g.Namespace == "" {
		return g.Permission.String() + " (cluster-wide)"
	}
	return g.Permission.String() + " in " + g.Namespace
}

// Grants are the permissions the rendered objects give the ServiceAccount
// namespace/name, through its bindings, from the roles named in them;
// skipRole leaves out roles whose name it reports (such as leader
// election's, which serves client-go's elector rather than the code).
func Grants(objs []*unstructured.Unstructured, namespace, name string, skipRole func(string) bool) ([]Grant, error) {
	r, err := decodeRBAC(objs)
	if err != nil {
		return nil, err
	}
	isSA := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name {
				return true
			}
		}
		return false
	}
	g := &grants{seen: map[Grant]bool{}}
	for _, b := range r.clusterRoleBindings {
		if !isSA(b.Subjects) || skipRole(b.RoleRef.Name) {
			continue
		}
		rules, ok := r.clusterRoles[b.RoleRef.Name]
		if !ok {
			return nil, fmt.Errorf("ClusterRoleBinding %s refers to ClusterRole %s, which the chart does not render", b.Name, b.RoleRef.Name)
		}
		if err := g.add("", rules); err != nil {
			return nil, err
		}
	}
	for _, b := range r.roleBindings {
		if !isSA(b.Subjects) || skipRole(b.RoleRef.Name) {
			continue
		}
		rules, ok := r.roles[b.Namespace+"/"+b.RoleRef.Name]
		if b.RoleRef.Kind == "ClusterRole" {
			rules, ok = r.clusterRoles[b.RoleRef.Name]
		}
		if !ok {
			return nil, fmt.Errorf("RoleBinding %s/%s refers to %s %s, which the chart does not render", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		if err := g.add(b.Namespace, rules); err != nil {
			return nil, err
		}
	}
	sort.Slice(g.out, func(i, j int) bool { return g.out[i].String() < g.out[j].String() })
	return g.out, nil
}

// rendered is the chart's RBAC objects: roles by name (Roles as
// namespace/name) and the bindings.
type rendered struct {
	clusterRoles        map[string][]rbacv1.PolicyRule
	roles               map[string][]rbacv1.PolicyRule
	clusterRoleBindings []rbacv1.ClusterRoleBinding
	roleBindings        []rbacv1.RoleBinding
}

func decodeRBAC(objs []*unstructured.Unstructured) (*rendered, error) {
	r := &rendered{clusterRoles: map[string][]rbacv1.PolicyRule{}, roles: map[string][]rbacv1.PolicyRule{}}
	for _, o := range objs {
		var err error
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var role rbacv1.Role
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role)
			if o.GetKind() == "ClusterRole" {
				r.clusterRoles[o.GetName()] = role.Rules
			} else {
				r.roles[o.GetNamespace()+"/"+o.GetName()] = role.Rules
			}
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b)
			r.clusterRoleBindings = append(r.clusterRoleBindings, b)
		case "RoleBinding":
			var b rbacv1.RoleBinding
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b)
			r.roleBindings = append(r.roleBindings, b)
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return r, nil
}

// grants collects permissions once each, in the order first seen.
type grants struct {
	seen map[Grant]bool
	out  []Grant
}

func (g *grants) add(ns string, rules []rbacv1.PolicyRule) error {
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			return fmt.Errorf("rule %v: only plain resource rules are expected", r)
		}
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if group == "*" || res == "*" || v == "*" {
						return fmt.Errorf("rule %v has a wildcard", r)
					}
					gr := Grant{ns, Permission{group, res, v}}
					if !g.seen[gr] {
						g.seen[gr] = true
						g.out = append(g.out, gr)
					}
				}
			}
		}
	}
	return nil
}

// Diff is what one side has and the other lacks, one per line.
func Diff[T comparable](have, want []T, show func(T) string) []string {
	in := map[T]bool{}
	for _, w := range want {
		in[w] = true
	}
	var out []string
	for _, h := range have {
		if !in[h] {
			out = append(out, show(h))
		}
	}
	sort.Strings(out)
	return out
}

// Lines joins items for a failure message.
func Lines(items []string) string { return "\n  " + strings.Join(items, "\n  ") }
