//go:build envtest

package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// editRule applies edit to the x-kubernetes-validations of the property at
// path (under the schema's root) of the CRD's only version.
func editRule(g Gomega, crd string, path []string, edit func([]apiextensionsv1.ValidationRule) []apiextensionsv1.ValidationRule) {
	ctx := context.Background()
	g.Eventually(func() error {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: crd}, c); err != nil {
			return err
		}
		root := c.Spec.Versions[0].Schema.OpenAPIV3Schema
		root.Properties = editAt(root.Properties, path, edit)
		return k8s.Update(ctx, c)
	}).WithTimeout(time.Minute).Should(Succeed())
}

func editAt(props map[string]apiextensionsv1.JSONSchemaProps, path []string, edit func([]apiextensionsv1.ValidationRule) []apiextensionsv1.ValidationRule) map[string]apiextensionsv1.JSONSchemaProps {
	p := props[path[0]]
	if len(path) == 1 {
		p.XValidations = edit(p.XValidations)
	} else {
		p.Properties = editAt(p.Properties, path[1:], edit)
	}
	props[path[0]] = p
	return props
}

// ratchet stores an object that a rule refuses, by taking the rule out of the
// CRD while the object is created and putting it back, as an object stored
// before the rule existed; the rule is back in force when refused reports
// that a new violating object is refused again.
func ratchet(t *testing.T, crd string, path []string, message string, create func() error, refused func() error) {
	g := NewWithT(t)
	var removed []apiextensionsv1.ValidationRule
	editRule(g, crd, path, func(rules []apiextensionsv1.ValidationRule) []apiextensionsv1.ValidationRule {
		var kept []apiextensionsv1.ValidationRule
		for _, r := range rules {
			if strings.HasPrefix(r.Message, message) {
				removed = append(removed, r)
			} else {
				kept = append(kept, r)
			}
		}
		return kept
	})
	g.Expect(removed).To(HaveLen(1), "the rule %q at %v", message, path)
	restore := func() {
		editRule(g, crd, path, func(rules []apiextensionsv1.ValidationRule) []apiextensionsv1.ValidationRule {
			for _, r := range rules {
				if r.Message == removed[0].Message {
					return rules
				}
			}
			return append(rules, removed...)
		})
	}
	t.Cleanup(restore)
	g.Eventually(create).WithTimeout(time.Minute).Should(Succeed(), "created while the rule is out")
	restore()
	g.Eventually(func() string {
		if err := refused(); err != nil {
			return err.Error()
		}
		return ""
	}).WithTimeout(time.Minute).Should(ContainSubstring(message), "the rule is back")
}

// TestRatchetingKeepsOldObjectsEditable: an object stored before a rule
// existed, which the rule refuses, stays editable in its other fields,
// since Kubernetes skips a rule whose value did not change in an update
// (CRD validation ratcheting); changing the refused value itself must
// satisfy the rule.
func TestRatchetingKeepsOldObjectsEditable(t *testing.T) {
	ctx := context.Background()
	t.Run("replicas", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("ratchet-replicas", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](11) })
		probe := 0
		ratchet(t, "etcdclusters.etcd.quorumctl.io", []string{"spec", "replicas"}, replicasMessage,
			func() error { return k8s.Create(ctx, c.DeepCopy()) },
			func() error {
				probe++
				p := newCluster("ratchet-replicas-probe-"+string(rune('a'+probe%26)), func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](11) })
				err := k8s.Create(ctx, p)
				if err == nil {
					_ = k8s.Delete(ctx, p)
				}
				return err
			})
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Spec.Version = "3.6.17"
		g.Expect(k8s.Update(ctx, c)).To(Succeed(), "an unrelated field of an old object with 11 replicas")
		c.Spec.Replicas = ptr.To[int32](12)
		err := k8s.Update(ctx, c)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring(replicasMessage))
		c.Spec.Replicas = ptr.To[int32](9)
		g.Expect(k8s.Update(ctx, c)).To(Succeed())
	})
	t.Run("schedule over http", func(t *testing.T) {
		g := NewWithT(t)
		s := newSchedule("ratchet-http", func(s *v1alpha1.EtcdSnapshotSchedule) {
			s.Spec.Destination = v1alpha1.SnapshotDestination{S3: &v1alpha1.S3Destination{Endpoint: "http://s3.example", Bucket: "backups"}}
		})
		probe := 0
		ratchet(t, "etcdsnapshotschedules.etcd.quorumctl.io", []string{"spec", "destination"}, httpsMessage,
			func() error { return k8s.Create(ctx, s.DeepCopy()) },
			func() error {
				probe++
				p := s.DeepCopy()
				p.Name = "ratchet-http-probe-" + string(rune('a'+probe%26))
				err := k8s.Create(ctx, p)
				if err == nil {
					_ = k8s.Delete(ctx, p)
				}
				return err
			})
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		s.Spec.Suspend = true
		s.Spec.Retention.KeepLast = ptr.To[int32](5)
		g.Expect(k8s.Update(ctx, s)).To(Succeed(), "suspending an old schedule that writes over http")
		s.Spec.Destination.S3.Prefix = "elsewhere/"
		err := k8s.Update(ctx, s)
		g.Expect(err).To(HaveOccurred(), "a changed destination must satisfy the rule")
		g.Expect(err.Error()).To(ContainSubstring(httpsMessage))
		s.Spec.Destination.S3.Insecure = true
		g.Expect(k8s.Update(ctx, s)).To(Succeed())
	})
}
