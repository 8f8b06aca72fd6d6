package localcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The local cluster's S3 server, for the operator's backups.
const (
	S3Namespace = "localcluster-s3"
	// S3Service and S3Port: in-cluster clients reach it at
	// http://s3.localcluster-s3.svc:7070 (see S3Endpoint).
	S3Service = "s3"
	S3Port    = 7070
	// S3CredentialsSecret holds accessKeyID and secretAccessKey.
	S3CredentialsSecret = "s3-credentials"
	// S3Bucket exists from the start.
	S3Bucket = "backups"
	// S3AccessKeyID and S3SecretAccessKey are the server's root
	// credentials. They guard nothing but test snapshots on this machine.
	S3AccessKeyID     = "localcluster"
	S3SecretAccessKey = "localcluster-secret-access-key"

	versityGWRepo = "localhost/localcluster/versitygw"
	// versityGWVersionKey pins github.com/versity/versitygw in versions.env.
	versityGWVersionKey = "VERSITYGW_VERSION"
)

// S3Endpoint is the server's in-cluster URL.
func S3Endpoint() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", S3Service, S3Namespace, S3Port)
}

// versityGWVersion reads the pinned versitygw version.
func (l Layout) versityGWVersion() (string, error) {
	values, err := readEnvFile(filepath.Join(l.RepoRoot, VersionsFile))
	if err != nil {
		return "", err
	}
	v := values[versityGWVersionKey]
	if v == "" {
		return "", fmt.Errorf("%s lacks %s", VersionsFile, versityGWVersionKey)
	}
	return v, nil
}

func versityGWBuild(version string) goBuild {
	return goBuild{
		name:     "versitygw-" + version,
		require:  []string{"github.com/versity/versitygw@" + version},
		binaries: map[string]string{"versitygw": "github.com/versity/versitygw/cmd/versitygw"},
	}
}

// VersityGWBinary returns the path of the pinned versitygw binary, building
// it once into the binary cache. Integration tests run it on loopback.
func (l Layout) VersityGWBinary(ctx context.Context, p *Progress) (string, error) {
	v, err := l.versityGWVersion()
	if err != nil {
		return "", err
	}
	dir, err := l.ensureBuilt(ctx, p, versityGWBuild(v))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "versitygw"), nil
}

// s3ImageSpecs are the images of the S3 server, built with the others.
func (l Layout) s3ImageSpecs(ctx context.Context, p *Progress) ([]ImageSpec, error) {
	v, err := l.versityGWVersion()
	if err != nil {
		return nil, err
	}
	bin, err := l.VersityGWBinary(ctx, p)
	if err != nil {
		return nil, err
	}
	return []ImageSpec{StaticBinaryImageSpec(versityGWRepo+":"+v, bin, "/versitygw")}, nil
}

type s3Values struct {
	Namespace, Image, AccessKeyID, SecretAccessKey string
	Port                                           int
	// AvoidNode is where the server does not run when it has a choice.
	AvoidNode string
}

// ensureS3 applies the S3 server, waits for it and creates its bucket.
func (l Layout) ensureS3(ctx context.Context, p *Progress, cfg *rest.Config, cs kubernetes.Interface) error {
	v, err := l.versityGWVersion()
	if err != nil {
		return err
	}
	p.Printf("applying the S3 server (versitygw %s)", v)
	objs, err := renderManifest("addons/s3.yaml", s3Values{
		Namespace: S3Namespace, Image: versityGWRepo + ":" + v, Port: S3Port,
		AccessKeyID: S3AccessKeyID, SecretAccessKey: S3SecretAccessKey, AvoidNode: NodeAt(0).Name,
	})
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("failed to create a client: %w", err)
	}
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("localcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("failed to apply %s %s from addons/s3.yaml: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	var podIP string
	err = poll(ctx, 3*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(S3Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=s3"})
		if err != nil {
			return false, err
		}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp == nil && s3PodReady(&pod) && pod.Status.PodIP != "" {
				podIP = pod.Status.PodIP
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the S3 server did not become ready: %w\n%s", err, podDiagnostics(ctx, cs, S3Namespace))
	}
	// The host reaches Pods on their bridge, so the bucket is made from
	// here, through the S3 API like any client would.
	err = poll(ctx, time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		err := CreateBucket(ctx, fmt.Sprintf("http://%s:%d", podIP, S3Port), S3AccessKeyID, S3SecretAccessKey, S3Bucket)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("failed to create the bucket %s: %w", S3Bucket, err)
	}
	p.Printf("S3 server ready at %s, bucket %s", S3Endpoint(), S3Bucket)
	return nil
}

// CreateBucket creates a bucket on an S3 server unless it exists.
func CreateBucket(ctx context.Context, endpoint, accessKeyID, secretAccessKey, bucket string) error {
	cli := s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, ""),
	})
	_, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "BucketAlreadyOwnedByYou" || apiErr.ErrorCode() == "BucketAlreadyExists") {
		return nil
	}
	return err
}

func s3PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
