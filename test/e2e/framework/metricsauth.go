package framework

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// MetricsReaderRole is the chart's ClusterRole for scraping the operator's
// metrics (get on /metrics), as make test-e2e's release names it.
const MetricsReaderRole = "etcd-operator-metrics-reader"

// OperatorMetricsPort is the port named "metrics" of the operator's Pods,
// which serves HTTPS.
const OperatorMetricsPort = 8443

// ServiceAccountToken creates ServiceAccount name in ns, binds it to the
// ClusterRole role when role is not empty, and returns a token for it that
// lasts an hour. Either may exist already. The caller deletes the
// namespace; the binding is deleted by cleanup.
func (e *Env) ServiceAccountToken(ctx context.Context, ns, name, role string) (token string, cleanup func(), err error) {
	cleanup = func() {}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := e.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", cleanup, err
	}
	if role != "" {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
		if _, err := e.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", cleanup, err
		}
		cleanup = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = e.Clientset.RbacV1().ClusterRoleBindings().Delete(ctx, crb.Name, metav1.DeleteOptions{})
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	out, err := e.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return "", cleanup, err
	}
	return out.Status.Token, cleanup, nil
}

// ScrapeOperator GETs /metrics of one operator Pod by its IP and returns
// the HTTP status code (see OperatorMetrics).
func ScrapeOperator(ctx context.Context, podIP, token string) (int, error) {
	code, _, err := OperatorMetrics(ctx, podIP, token)
	return code, err
}

// OperatorMetrics GETs /metrics of one operator Pod by its IP, over HTTPS
// without verifying the operator's self-signed certificate, with token as
// bearer unless it is empty, and returns the status code and body.
func OperatorMetrics(ctx context.Context, podIP, token string) (int, []byte, error) {
	u := "https://" + hostPort(podIP, OperatorMetricsPort) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's certificate is self-signed
	}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func hostPort(ip string, port int) string {
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
