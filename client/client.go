// Package client talks to a Bulkhead controller's operator API
// (api/openapi.yaml) for `bulkhead apply`, `get`, `delete` and `describe`,
// for the testbed, and for programs of operators: apply objects, list,
// get and delete them. An error answer is an *Error with the controller's
// located problems.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Client is a connection to one controller.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Options configure a Client.
type Options struct {
	// Token is the operator token (sent as Authorization: Bearer).
	Token string
	// TLS is the client's TLS configuration for an https URL (with an
	// operator certificate for client-certificate authentication).
	TLS *tls.Config
	// Timeout bounds every request (default 30 s).
	Timeout time.Duration
}

// New returns a client of the controller at server (http://HOST:PORT or
// https://...).
func New(server string, opt Options) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("controller address %q: expected http://HOST:PORT or https://HOST:PORT", server)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = opt.TLS
	return &Client{base: u, token: opt.Token, http: &http.Client{Transport: tr, Timeout: opt.Timeout}}, nil
}

// Error is an answer other than success: the HTTP status and the
// controller's problem report.
type Error struct {
	Status  int
	Problem api.Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Problem.Error)
	if len(e.Problem.Problems) > 1 || (len(e.Problem.Problems) == 1 && !strings.Contains(e.Problem.Error, e.Problem.Problems[0].Message)) {
		for _, p := range e.Problem.Problems {
			b.WriteString("\n  ")
			if p.Object != "" {
				b.WriteString(p.Object + ": ")
			}
			if p.Path != "" {
				b.WriteString(p.Path + ": ")
			}
			b.WriteString(p.Message)
		}
	}
	return b.String()
}

// NotFound reports whether err is a controller's 404.
func NotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// do sends one request; a follower's refusal to write (421) is retried
// once at the leader it names.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	err := c.doAt(ctx, c.base, method, path, body, out)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusMisdirectedRequest && e.Problem.Leader != "" {
		leader, perr := url.Parse(e.Problem.Leader)
		if perr == nil && (leader.Scheme == "http" || leader.Scheme == "https") && leader.Host != "" {
			return c.doAt(ctx, leader, method, path, body, out)
		}
	}
	return err
}

func (c *Client) doAt(ctx context.Context, base *url.URL, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := base.JoinPath(path)
	if i := strings.IndexByte(path, '?'); i >= 0 {
		u = base.JoinPath(path[:i])
		u.RawQuery = path[i+1:]
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("controller at %s: %w", base.Redacted(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("controller at %s: read the answer: %w", base.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(b, &e.Problem) != nil || e.Problem.Error == "" {
			e.Problem.Error = fmt.Sprintf("controller at %s answered %s", base.Redacted(), resp.Status)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("controller at %s: unexpected answer: %w", base.Redacted(), err)
		}
	}
	return nil
}

// Apply creates or updates objects, all or nothing (dryRun: checked and
// placed, nothing stored).
func (c *Client) Apply(ctx context.Context, objs []api.Object, dryRun bool) (*api.ApplyResult, error) {
	path := "/api/v1/apply"
	if dryRun {
		path += "?dryRun=true"
	}
	var res api.ApplyResult
	if err := c.do(ctx, http.MethodPost, path, api.ObjectList{Objects: objs}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// List returns every object of a kind, with status.
func (c *Client) List(ctx context.Context, kind string) ([]api.Object, error) {
	var res api.ObjectList
	if err := c.do(ctx, http.MethodGet, "/api/v1/"+api.Plural(kind), nil, &res); err != nil {
		return nil, err
	}
	return res.Objects, nil
}

// Get returns one object, with status.
func (c *Client) Get(ctx context.Context, kind, name string) (api.Object, error) {
	var o api.Object
	err := c.do(ctx, http.MethodGet, "/api/v1/"+api.Plural(kind)+"/"+url.PathEscape(name), nil, &o)
	return o, err
}

// Delete deletes one object and returns it.
func (c *Client) Delete(ctx context.Context, kind, name string) (api.Object, error) {
	var o api.Object
	err := c.do(ctx, http.MethodDelete, "/api/v1/"+api.Plural(kind)+"/"+url.PathEscape(name), nil, &o)
	return o, err
}

// CapacityEstimates reads the leading controller's latest capacity
// estimate of every appliance its central controller estimates (tokens/s,
// by appliance), from its Prometheus metrics
// (bulkhead_controller_appliance_capacity_estimate). A controller that
// estimates none (another mechanism, or a follower) gives an empty map.
func (c *Client) CapacityEstimates(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("metrics").String(), nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" { // off loopback, /metrics needs the operator's credentials
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("controller at %s: %w", c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("controller at %s: metrics: %s", c.base.Redacted(), resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("controller at %s: metrics: %w", c.base.Redacted(), err)
	}
	out := map[string]float64{}
	if f := fams[EstimateMetric]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "appliance" && m.GetGauge() != nil {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out, nil
}

// EstimateMetric is the controller's metric of its capacity estimates.
const EstimateMetric = "bulkhead_controller_appliance_capacity_estimate"
