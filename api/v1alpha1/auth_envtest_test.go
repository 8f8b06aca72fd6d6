//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// TestAuthValidation: spec.auth's rules, each with its message.
func TestAuthValidation(t *testing.T) {
	cases := []struct {
		name    string
		auth    v1alpha1.AuthSpec
		message string
	}{
		{"a root Secret without enabling", v1alpha1.AuthSpec{RootSecretName: "root"},
			"auth.rootSecretName is only used with auth.enabled: true"},
		{"a root Secret that is no name", v1alpha1.AuthSpec{Enabled: true, RootSecretName: "Root_Password"},
			"auth.rootSecretName must be the name of a Secret"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newCluster(fmt.Sprintf("auth-create-%d", i), func(c *v1alpha1.EtcdCluster) {
				c.Spec.Auth = tc.auth.DeepCopy()
			}))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

// TestAuthCannotBeTurnedOff: authentication can be turned on at creation
// or later, and its Secret changed, but once on it is never turned off,
// neither by enabled: false nor by removing spec.auth.
func TestAuthCannotBeTurnedOff(t *testing.T) {
	const refused = "spec.auth.enabled cannot be turned off once it is on: the operator does not turn etcd's authentication off"
	ctx := context.Background()
	t.Run("turning it on later, then changing its Secret", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("auth-on", nil)
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
		g.Expect(k8s.Update(ctx, c)).To(Succeed())
		c.Spec.Auth.RootSecretName = "my-root"
		g.Expect(k8s.Update(ctx, c)).To(Succeed())
	})
	t.Run("a disabled auth can be removed", func(t *testing.T) {
		g := NewWithT(t)
		c := newCluster("auth-never", func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = &v1alpha1.AuthSpec{} })
		g.Expect(k8s.Create(ctx, c)).To(Succeed())
		c.Spec.Auth = nil
		g.Expect(k8s.Update(ctx, c)).To(Succeed())
	})
	for name, off := range map[string]func(c *v1alpha1.EtcdCluster){
		"enabled: false":     func(c *v1alpha1.EtcdCluster) { c.Spec.Auth.Enabled = false },
		"removing spec.auth": func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = nil },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := newCluster(fmt.Sprintf("auth-off-%d", len(name)), func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true} })
			g.Expect(k8s.Create(ctx, c)).To(Succeed())
			off(c)
			err := k8s.Update(ctx, c)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(refused))
		})
	}
}
