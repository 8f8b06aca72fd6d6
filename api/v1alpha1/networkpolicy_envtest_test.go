//go:build envtest

package v1alpha1_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/quorumctl/etcd-operator/api/v1alpha1"
)

// TestNetworkPolicyDefaults: an EtcdCluster gets a NetworkPolicy unless it
// says otherwise.
func TestNetworkPolicyDefaults(t *testing.T) {
	g := NewWithT(t)
	c := newCluster("netpol-defaults", nil)
	g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	g.Expect(c.Spec.NetworkPolicy.Enabled).To(Equal(ptr.To(true)))
	g.Expect(c.Spec.NetworkPolicy.AllowedClients).To(BeEmpty())
}

func TestNetworkPolicyAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newCluster("netpol-accepted", func(c *v1alpha1.EtcdCluster) {
		c.Spec.NetworkPolicy.AllowedClients = []v1alpha1.NetworkPolicyClient{
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}},
			{NamespaceSelector: &metav1.LabelSelector{}},
			{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}},
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "etcd-client", Operator: metav1.LabelSelectorOpExists}}},
			},
			{IPBlock: &v1alpha1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
			{IPBlock: &v1alpha1.IPBlock{CIDR: "2001:db8::/64"}},
		}
	})
	g.Expect(k8s.Create(ctx, c)).To(Succeed())
	c.Spec.NetworkPolicy.Enabled = ptr.To(false)
	c.Spec.NetworkPolicy.AllowedClients = nil
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "the policy may be switched off and its clients changed at any time")
	c.Spec.NetworkPolicy.Enabled = ptr.To(true)
	g.Expect(k8s.Update(ctx, c)).To(Succeed(), "and switched on again")
}

func TestNetworkPolicyValidation(t *testing.T) {
	ipBlock := &v1alpha1.IPBlock{CIDR: "10.0.0.0/8"}
	cases := []struct {
		name    string
		client  v1alpha1.NetworkPolicyClient
		message string
	}{
		{"empty entry", v1alpha1.NetworkPolicyClient{},
			"networkPolicy.allowedClients: each entry needs podSelector, namespaceSelector or ipBlock"},
		{"ipBlock with a pod selector", v1alpha1.NetworkPolicyClient{IPBlock: ipBlock, PodSelector: &metav1.LabelSelector{}},
			"networkPolicy.allowedClients: ipBlock cannot be combined with podSelector or namespaceSelector in one entry; use two entries"},
		{"ipBlock with a namespace selector", v1alpha1.NetworkPolicyClient{IPBlock: ipBlock, NamespaceSelector: &metav1.LabelSelector{}},
			"networkPolicy.allowedClients: ipBlock cannot be combined with podSelector or namespaceSelector in one entry; use two entries"},
		{"address without a prefix length", v1alpha1.NetworkPolicyClient{IPBlock: &v1alpha1.IPBlock{CIDR: "10.0.0.1"}},
			"ipBlock.cidr in body must be of type cidr"},
		{"exception that is no CIDR", v1alpha1.NetworkPolicyClient{IPBlock: &v1alpha1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"nope"}}},
			"ipBlock.except[0] in body must be of type cidr"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(context.Background(), newCluster(fmt.Sprintf("netpol-create-%d", i), func(c *v1alpha1.EtcdCluster) {
				c.Spec.NetworkPolicy.AllowedClients = []v1alpha1.NetworkPolicyClient{tc.client}
			}))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
	t.Run("too many clients", func(t *testing.T) {
		g := NewWithT(t)
		err := k8s.Create(context.Background(), newCluster("netpol-many", func(c *v1alpha1.EtcdCluster) {
			for range v1alpha1.MaxAllowedClients + 1 {
				c.Spec.NetworkPolicy.AllowedClients = append(c.Spec.NetworkPolicy.AllowedClients,
					v1alpha1.NetworkPolicyClient{PodSelector: &metav1.LabelSelector{}})
			}
		}))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("must have at most 32 items"))
	})
}
