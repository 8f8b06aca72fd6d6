package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/quorumctl/etcd-operator/internal/backup"
)

// Upload tuning. Parts are buffered in memory, PartSize × (Concurrency+1) at
// most; 16 MiB parts keep a 1 GiB snapshot at 64 parts, well inside S3's
// limit of 10,000, and the buffers at 80 MiB.
const (
	DefaultPartSize    = 16 << 20
	DefaultConcurrency = 4
	// failTimeout gives the abort of a failed multipart upload a context
	// of its own, so that it runs even when the upload's was cancelled.
	failTimeout = 30 * time.Second
)

// S3Config is one bucket and how to reach it.
type S3Config struct {
	// Endpoint is the server's URL; empty means AWS's for the region.
	Endpoint string
	Bucket   string
	// Prefix is put before every key.
	Prefix string
	// Region defaults to us-east-1.
	Region         string
	ForcePathStyle bool
	// AccessKeyID and SecretAccessKey are static credentials.
	AccessKeyID     string
	SecretAccessKey string
	// AmbientCredentials lets the SDK's default chain (environment, shared
	// files, web identity, the instance role) find credentials when there
	// are no static ones. Off, a client without static credentials is
	// refused: the chain's credentials belong to whoever runs the process,
	// not to whoever named the bucket.
	AmbientCredentials bool
	// CAFile holds PEM certificates to trust for the endpoint, besides the
	// system's.
	CAFile string
	// PartSize and Concurrency tune uploads; zero means the defaults.
	PartSize    int64
	Concurrency int
}

// S3 keeps objects in a bucket.
type S3 struct {
	cfg      S3Config
	client   *s3.Client
	transfer *transfermanager.Client
}

var _ Store = (*S3)(nil)

// NewS3 builds the client. It makes no request.
func NewS3(ctx context.Context, c S3Config) (*S3, error) {
	if c.Bucket == "" {
		return nil, fmt.Errorf("%w: no bucket", backup.ErrInvalidArguments)
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return nil, fmt.Errorf("%w: the credentials need both an access key ID and a secret access key", backup.ErrCredentials)
	}
	if c.AccessKeyID == "" && !c.AmbientCredentials {
		return nil, fmt.Errorf("%w: no static credentials, and ambient credentials are not allowed for bucket %s", backup.ErrCredentials, c.Bucket)
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(c.Region)}
	if c.AccessKeyID != "" {
		// Static credentials replace the default chain: the client never
		// asks the environment or the instance metadata service.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, "")))
	}
	if c.CAFile != "" {
		hc, err := httpClientTrusting(c.CAFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, config.WithHTTPClient(hc))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("failed to configure the S3 client: %w", err)
	}
	options := func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
		o.UsePathStyle = c.ForcePathStyle
		// Checksums only where the API requires them: S3-compatible servers
		// vary in which of the newer checksum headers they accept, and each
		// snapshot carries SHA-256s of its own that are checked end to end.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}
	client := s3.NewFromConfig(awsCfg, options)
	// Uploads sign UNSIGNED-PAYLOAD over http:// too, as the SDK does over
	// https://. Signing the payload means a SHA-256 of every part before
	// it is sent and another on the server; over http (s3.insecure) that
	// was a quarter of the agent's CPU while saving (BenchmarkSaveToS3), and
	// what it would catch, bytes changed on the way, the snapshot's own
	// SHA-256s catch: the object's, recorded in the metadata and checked
	// by every restore, and etcd's inside it (docs/design/0028).
	uploads := s3.NewFromConfig(awsCfg, options, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
	partSize, concurrency := c.PartSize, c.Concurrency
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if concurrency == 0 {
		concurrency = DefaultConcurrency
	}
	transfer := transfermanager.New(uploads, func(o *transfermanager.Options) {
		o.PartSizeBytes = partSize
		o.MultipartUploadThreshold = partSize
		o.Concurrency = concurrency
		o.FailTimeout = failTimeout
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	return &S3{cfg: c, client: client, transfer: transfer}, nil
}

func httpClientTrusting(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("failed to read the CA bundle %s: %w", caFile, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: the CA bundle %s holds no PEM certificate", backup.ErrInvalidArguments, caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

func (s *S3) full(key string) string { return path.Join(s.cfg.Prefix, key) }

// classify maps the S3 API's error codes and statuses onto the backup
// sentinels. HEAD responses have no body, so for them only the status says
// what went wrong.
func (s *S3) classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken", "AuthorizationHeaderMalformed":
			return fmt.Errorf("failed to %s s3://%s/%s: %w: %v", op, s.cfg.Bucket, s.full(key), backup.ErrCredentials, err)
		case "NoSuchBucket":
			return fmt.Errorf("failed to %s s3://%s/%s: %w: %v", op, s.cfg.Bucket, s.full(key), backup.ErrBucketNotFound, err)
		case "NoSuchKey":
			return fmt.Errorf("failed to %s s3://%s/%s: %w", op, s.cfg.Bucket, s.full(key), backup.ErrNotFound)
		}
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		switch respErr.HTTPStatusCode() {
		case http.StatusForbidden, http.StatusUnauthorized:
			return fmt.Errorf("failed to %s s3://%s/%s: %w: %v", op, s.cfg.Bucket, s.full(key), backup.ErrCredentials, err)
		case http.StatusNotFound:
			return fmt.Errorf("failed to %s s3://%s/%s: %w", op, s.cfg.Bucket, s.full(key), backup.ErrNotFound)
		}
	}
	return fmt.Errorf("failed to %s s3://%s/%s: %w", op, s.cfg.Bucket, s.full(key), err)
}

// notFoundBucket tells a missing object from a missing bucket, which a
// HEAD of the object does not.
func (s *S3) notFoundBucket(ctx context.Context, err error) error {
	if !errors.Is(err, backup.ErrNotFound) {
		return err
	}
	_, herr := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)})
	if herr = s.classify("look up bucket", "", herr); errors.Is(herr, backup.ErrNotFound) {
		return fmt.Errorf("%w: s3://%s", backup.ErrBucketNotFound, s.cfg.Bucket)
	}
	return err
}

type s3Writer struct {
	pw     *io.PipeWriter
	done   chan struct{}
	err    error
	ended  bool
	cancel context.CancelFunc
}

// errAborted ends an upload on purpose.
var errAborted = errors.New("upload aborted")

func (s *S3) Writer(ctx context.Context, key string) (ObjectWriter, error) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	w := &s3Writer{pw: pw, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		// A failed read of the body (an abort) fails the upload, which then
		// aborts its multipart upload: no object appears.
		_, err := s.transfer.UploadObject(ctx, &transfermanager.UploadObjectInput{
			Bucket: aws.String(s.cfg.Bucket),
			Key:    aws.String(s.full(key)),
			Body:   pr,
		})
		w.err = s.classify("upload", key, err)
		// Writers blocked on a failed upload must not wait forever.
		_ = pr.CloseWithError(errors.Join(errAborted, w.err))
	}()
	return w, nil
}

func (w *s3Writer) Write(p []byte) (int, error) {
	n, err := w.pw.Write(p)
	if err != nil {
		return n, fmt.Errorf("the upload ended early: %w", err)
	}
	return n, nil
}

func (w *s3Writer) Commit() error {
	if w.ended {
		return errors.New("the object is already committed or aborted")
	}
	w.ended = true
	_ = w.pw.Close()
	<-w.done
	w.cancel()
	return w.err
}

func (w *s3Writer) Abort() error {
	if w.ended {
		return nil
	}
	w.ended = true
	_ = w.pw.CloseWithError(errAborted)
	<-w.done
	w.cancel()
	return nil
}

func (s *S3) Reader(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.full(key))})
	if err != nil {
		return nil, s.notFoundBucket(ctx, s.classify("read", key, err))
	}
	return out.Body, nil
}

func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.full(key))})
	if err != nil {
		return ObjectInfo{}, s.notFoundBucket(ctx, s.classify("stat", key, err))
	}
	info := ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength)}
	if out.LastModified != nil {
		info.Modified = *out.LastModified
	}
	return info, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.full(key))})
	if err = s.classify("delete", key, err); errors.Is(err, backup.ErrNotFound) {
		// DeleteObject of a missing key succeeds on S3; a 404 here can only
		// be the bucket.
		return s.notFoundBucket(ctx, err)
	}
	return err
}

func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	root := s.cfg.Prefix
	if root != "" && !strings.HasSuffix(root, "/") {
		root += "/"
	}
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.cfg.Bucket),
		Prefix: aws.String(root + prefix),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.classify("list", prefix, err)
		}
		for _, o := range page.Contents {
			info := ObjectInfo{Key: strings.TrimPrefix(aws.ToString(o.Key), root), Size: aws.ToInt64(o.Size)}
			if o.LastModified != nil {
				info.Modified = *o.LastModified
			}
			out = append(out, info)
		}
	}
	return out, nil
}

// PendingUploads lists multipart uploads not completed nor aborted under
// the store's prefix. Tests use it to check that a failed upload left none.
func (s *S3) PendingUploads(ctx context.Context) ([]string, error) {
	out, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{
		Bucket: aws.String(s.cfg.Bucket),
		Prefix: aws.String(s.cfg.Prefix),
	})
	if err != nil {
		return nil, s.classify("list uploads", "", err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys, nil
}
