package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/subject"
	"github.com/nats-sinks/nats-sink/secret"
)

// validate applies the rules that involve more than one key, or more than
// a per-key tag can say. Per-key rules live in the struct tags.
func (c *Config) validate(p *fields.Problems) {
	c.NATS.validate(p)
	c.ConsumerManagement.validate(&c.NATS, p)
	c.Delivery.validate(c, p)
	c.DeadLetter.validate(c, p)
	if c.Logging.PayloadLogging {
		p.Add("logging.payload_logging", "payload logging is not supported; payloads are never logged")
	}
	c.Metrics.validate(p)
	c.MessageMetadata.validate(p)
	c.Encryption.validate(p)
	c.Tracing.validate(p)
	c.MessageAuthenticity.validate(p)
	c.Custody.validate(p)
	c.checkPayloadReads(p)
}

var (
	headerName     = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
	metadataKey    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$`)
	secretKeyWords = []string{"password", "token", "secret", "private_key", "credentials", "creds", "cert_file", "key_file", "nkey_seed", "key_b64", "key_material"}
)

func checkName(path, name string, p *fields.Problems) {
	if name == "" {
		return // "must not be empty" comes from the tag
	}
	if strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r == 0x7f || strings.ContainsRune(`.*>/\`, r) || r == 0x85 || r == 0xa0
	}) {
		p.Add(path, `must not contain whitespace, '.', '*', '>', '/' or '\'`)
	}
}

func checkPattern(path, pattern string, p *fields.Problems) bool {
	if err := subject.Validate(pattern); err != nil {
		p.Add(path, "invalid subject pattern: "+err.Error())
		return false
	}
	return true
}

func (n *NATS) validate(p *fields.Problems) {
	for _, pr := range n.Connection.Rules("nats", "nats.") {
		p.Add(pr.Path, pr.Message)
	}
	checkName("nats.stream", n.Stream, p)
	checkName("nats.consumer", n.Consumer, p)
	if n.Subject != "" {
		checkPattern("nats.subject", n.Subject, p)
	}
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// subjectValid reports whether nats.subject is a usable pattern, so rules
// comparing against it do not pile errors onto an already reported one.
func (n *NATS) subjectValid() bool { return n.Subject != "" && subject.Validate(n.Subject) == nil }

func (cm *ConsumerManagement) validate(n *NATS, p *fields.Problems) {
	seen := map[string]bool{}
	for i, f := range cm.FilterSubjects {
		path := fields.Index("consumer_management.filter_subjects", i)
		if !checkPattern(path, f, p) {
			continue
		}
		if seen[f] {
			p.Addf(path, "duplicate filter subject %q", f)
			continue
		}
		seen[f] = true
		if n.subjectValid() && !subject.Contains(n.Subject, f) {
			p.Addf(path, "%q is not contained by nats.subject %q", f, n.Subject)
		}
	}
	if cm.BackoffSeconds != nil {
		const path = "consumer_management.backoff_seconds"
		switch {
		case cm.MaxDeliver == nil:
			p.Add(path, "requires consumer_management.max_deliver")
		case len(*cm.BackoffSeconds) > *cm.MaxDeliver:
			p.Addf(path, "must have at most max_deliver (%d) entries (got %d)", *cm.MaxDeliver, len(*cm.BackoffSeconds))
		}
		if cm.AckWaitSeconds != nil {
			p.Add(path, "must not be set together with consumer_management.ack_wait_seconds")
		}
	}
	for _, k := range sortedKeys(cm.Metadata) {
		path := "consumer_management.metadata." + k
		if !metadataKey.MatchString(k) {
			p.Addf(path, "key must match %s", metadataKey)
			continue
		}
		lower := strings.ToLower(k)
		for _, w := range secretKeyWords {
			if strings.Contains(lower, w) {
				p.Addf(path, "key must not name secret material (contains %q); consumer metadata is readable by anyone who can read the consumer", w)
				break
			}
		}
	}
}

func (d *Delivery) validate(c *Config, p *fields.Problems) {
	if d.RetryBackoffMaxMS < d.RetryBackoffMS {
		p.Addf("delivery.retry_backoff_max_ms", "must be at least delivery.retry_backoff_ms (%d) (got %d)", d.RetryBackoffMS, d.RetryBackoffMaxMS)
	}
	if !d.PreferSafeDuplication {
		p.Add("delivery.prefer_safe_duplication", "false is not supported; the runtime always prefers redelivery over loss")
	}
	d.PriorityLanes.validate(p)
	if d.InProgress.Enabled {
		const path = "delivery.in_progress.enabled"
		cm := &c.ConsumerManagement
		if !c.NATS.Durable {
			p.Add(path, "requires nats.durable to be true")
		}
		if cm.BackoffSeconds != nil {
			p.Add(path, "must not be used with consumer_management.backoff_seconds")
		}
		if cm.AckWaitSeconds == nil && cm.Mode != "bind_only" {
			p.Add(path, "requires consumer_management.ack_wait_seconds (unless consumer_management.mode is bind_only)")
		}
		if cm.AckWaitSeconds != nil {
			limit := 0.8 * *cm.AckWaitSeconds * 1000
			if float64(d.InProgress.IntervalMS) >= limit {
				p.Addf("delivery.in_progress.interval_ms", "must be less than 80%% of consumer_management.ack_wait_seconds (%s ms) (got %d)",
					strconv.FormatFloat(limit, 'f', -1, 64), d.InProgress.IntervalMS)
			}
		}
	}
}

func (pl *PriorityLanes) validate(p *fields.Problems) {
	names := map[string]bool{}
	owner := map[string]string{} // priority value -> lane name
	for i := range pl.Lanes {
		lane := &pl.Lanes[i]
		path := fields.Index("delivery.priority_lanes.lanes", i)
		if names[lane.Name] {
			p.Addf(path+".name", "duplicate lane name %q", lane.Name)
		}
		names[lane.Name] = true
		var kept []string
		for j, v := range lane.Priorities {
			vp := fields.Index(path+".priorities", j)
			if len([]rune(v)) > pl.MaxPriorityValueLength {
				p.Addf(vp, "must be at most max_priority_value_length (%d) characters", pl.MaxPriorityValueLength)
				continue
			}
			if o, dup := owner[v]; dup {
				if o != lane.Name {
					p.Addf(vp, "priority %q is already assigned to lane %q", v, o)
				}
				continue // the same value twice in one lane is harmless
			}
			owner[v] = lane.Name
			kept = append(kept, v)
		}
		lane.Priorities = append([]string{}, kept...)
	}
	if len(pl.Lanes) > 0 && pl.DefaultLane != "" && !names[pl.DefaultLane] {
		p.Addf("delivery.priority_lanes.default_lane", "%q does not name a lane", pl.DefaultLane)
	}
}

func (dl *DeadLetter) validate(c *Config, p *fields.Problems) {
	const path = "dead_letter.subject"
	if dl.Subject == nil {
		if dl.Enabled {
			p.Add(path, "required when dead_letter.enabled is true")
		}
		return
	}
	s := *dl.Subject
	if err := subject.Validate(s); err != nil {
		p.Add(path, "invalid subject: "+err.Error())
		return
	}
	if !subject.IsLiteral(s) {
		p.Add(path, "must be a literal subject (no wildcards)")
		return
	}
	if !dl.Enabled {
		return
	}
	consumed := c.NATS.subjectValid() && subject.Match(c.NATS.Subject, s)
	for _, f := range c.ConsumerManagement.FilterSubjects {
		consumed = consumed || subject.Validate(f) == nil && subject.Match(f, s)
	}
	if consumed {
		p.Add(path, "would be consumed by this sink's own consumer")
	}
}

func (m *Metrics) validate(p *fields.Problems) {
	if m.Listen == nil {
		return
	}
	const path = "metrics.listen"
	host, port, err := net.SplitHostPort(*m.Listen)
	if err != nil || fields.HasControl(*m.Listen) {
		p.Add(path, "must be host:port (for example 127.0.0.1:9464, [::1]:9464 or :9464)")
		return
	}
	if strings.ContainsAny(host, " /") {
		p.Add(path, "must be host:port (for example 127.0.0.1:9464, [::1]:9464 or :9464)")
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		p.Addf(path, "port must be between 1 and 65535 (got %q)", port)
	}
}

func (mm *MessageMetadata) validate(p *fields.Problems) {
	mm.Labels.Default = normaliseLabels("message_metadata.labels.default", mm.Labels.Default, p)
	for i := range mm.Rules {
		r := &mm.Rules[i]
		path := fields.Index("message_metadata.rules", i)
		if r.Subject != "" {
			checkPattern(path+".subject", r.Subject, p)
		}
		if !r.HasPriority && !r.HasClassification && !r.HasLabels {
			p.Add(path, "must set at least one of priority, classification, labels")
		}
		r.Labels = normaliseLabels(path+".labels", r.Labels, p)
	}
}

// normaliseLabels applies data-shapes §2.4: items trimmed, empty ones
// dropped, duplicates dropped keeping the first. A string value was already
// split on ';' by the decoder, so an item still holding ';' came from an
// array, where it is not allowed.
func normaliseLabels(path string, in []string, p *fields.Problems) []string {
	out := []string{}
	for i, l := range in {
		if strings.Contains(l, ";") {
			p.Add(fields.Index(path, i), "must not contain ';'")
			continue
		}
		if fields.HasControl(l) {
			p.Add(fields.Index(path, i), "must not contain control characters")
			continue
		}
		l = strings.TrimSpace(l)
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func (e *Encryption) validate(p *fields.Problems) {
	checkKeySources("encryption", e.KeyB64, e.KeyB64Env, e.KeyB64File, p)
	if e.Algorithm == "aes-256-gcm" && e.NonceSizeBytes < 8 {
		p.Addf("encryption.nonce_size_bytes", "must be between 8 and 13 for aes-256-gcm (got %d)", e.NonceSizeBytes)
	}
	if e.Enabled && !e.HasKey() {
		p.Add("encryption", "key_b64_env or key_b64 is required because encryption.enabled is true")
	}
	for i := range e.Rules {
		r := &e.Rules[i]
		path := fields.Index("encryption.rules", i)
		if r.Subject != "" {
			checkPattern(path+".subject", r.Subject, p)
		}
		checkKeySources(path, r.KeyB64, r.KeyB64Env, r.KeyB64File, p)
		alg, nonce := e.Algorithm, e.NonceSizeBytes
		if r.Algorithm != nil {
			alg = *r.Algorithm
		}
		if r.NonceSizeBytes != nil {
			nonce = *r.NonceSizeBytes
		}
		if alg == "aes-256-gcm" && nonce < 8 {
			switch {
			case r.NonceSizeBytes != nil:
				p.Addf(path+".nonce_size_bytes", "must be between 8 and 13 for aes-256-gcm (got %d)", nonce)
			case r.Algorithm != nil:
				p.Addf(path+".algorithm", "aes-256-gcm requires nonce_size_bytes between 8 and 13 (inherited %d)", nonce)
			}
		}
		if r.Enabled && !r.HasKey() && !e.HasKey() {
			p.Add(path, "key_b64_env or key_b64 is required because no top-level encryption key is configured")
		}
	}
}

// warnings returns "<path>: <text>" for every encryption setting in use
// that is accepted for compatibility but weak: a GCM nonce other than 12
// bytes, a CCM nonce under 12 bytes, a CCM tag under 16 bytes. A setting is
// in use when the top level or a rule that inherits it is enabled; the
// path is the key that set the weak value (a rule's own, or the top
// level's it inherits), named once.
func (e *Encryption) warnings() []string {
	var out []string
	seen := map[string]bool{}
	warn := func(path, text string) {
		if !seen[path] {
			seen[path] = true
			out = append(out, path+": "+text)
		}
	}
	check := func(alg string, nonce, tag int, noncePath, tagPath string) {
		switch alg {
		case "aes-256-gcm":
			if nonce != 12 {
				warn(noncePath, fmt.Sprintf("%d-byte nonces with aes-256-gcm are accepted for compatibility but weaker than the 12 bytes GCM is built for "+
					"(random nonces repeat sooner, and one repeat breaks GCM's confidentiality and integrity for that key); use 12", nonce))
			}
		case "aes-256-ccm":
			if nonce < 12 {
				warn(noncePath, fmt.Sprintf("%d-byte nonces with aes-256-ccm are accepted for compatibility but repeat sooner than 12- or 13-byte ones "+
					"(a repeat breaks CCM for that key); use 12 or 13", nonce))
			}
			if tag < 16 {
				warn(tagPath, fmt.Sprintf("%d-byte tags with aes-256-ccm are accepted for compatibility but a forged envelope passes with probability 2^-%d; use 16",
					tag, 8*tag))
			}
		}
	}
	v1 := false
	if e.Enabled {
		check(e.Algorithm, e.NonceSizeBytes, e.TagLength, "encryption.nonce_size_bytes", "encryption.tag_length")
		v1 = e.EnvelopeVersion == 1
	}
	for i := range e.Rules {
		r := &e.Rules[i]
		if !r.Enabled {
			continue
		}
		path := fields.Index("encryption.rules", i)
		alg, nonce, tag := e.Algorithm, e.NonceSizeBytes, e.TagLength
		noncePath, tagPath := "encryption.nonce_size_bytes", "encryption.tag_length"
		if r.Algorithm != nil {
			alg = *r.Algorithm
		}
		if r.NonceSizeBytes != nil {
			nonce, noncePath = *r.NonceSizeBytes, path+".nonce_size_bytes"
		}
		if r.TagLength != nil {
			tag, tagPath = *r.TagLength, path+".tag_length"
		}
		check(alg, nonce, tag, noncePath, tagPath)
		if r.EnvelopeVersion != nil && *r.EnvelopeVersion == 1 || r.EnvelopeVersion == nil && e.EnvelopeVersion == 1 {
			v1 = true
		}
	}
	if v1 {
		out = append(out, "encryption: envelope version 1 stores a plaintext SHA-256 that reveals guessable payloads; "+
			"set envelope_version 2 where readers need no upstream compatibility")
	}
	return out
}

// checkKeySources checks that one key has at most one source and that
// direct key material decodes to an AES-256 key; key material is never
// echoed.
func checkKeySources(path string, value *secret.Value, envName, fileName *string, p *fields.Problems) {
	if countSet(value != nil, envName != nil, fileName != nil) > 1 {
		p.Add(path+".key_b64", "set only one of key_b64, key_b64_env, key_b64_file")
	}
	if value != nil {
		if _, err := DecodeKey(*value); err != nil {
			p.Add(path+".key_b64", err.Error())
		}
	}
	if envName != nil && *envName != "" && !envVarName.MatchString(*envName) {
		p.Addf(path+".key_b64_env", "must be an environment variable name (got %q)", *envName)
	}
}

// envVarName is deliberately looser than the header maps' rule: upstream
// accepted any non-blank name here, so only whitespace, '=' and controls
// are refused.
var envVarName = regexp.MustCompile(`^[^\s=\x00-\x1f]+$`)

func (t *Tracing) validate(p *fields.Problems) {
	if t.Endpoint != nil {
		const path = "tracing.endpoint"
		u, err := url.Parse(*t.Endpoint)
		switch {
		case err != nil || fields.HasControl(*t.Endpoint):
			p.Add(path, "must be an http:// or https:// URL")
		case u.Scheme != "http" && u.Scheme != "https":
			p.Add(path, "must be an http:// or https:// URL")
		case u.Hostname() == "":
			p.Add(path, "must include a host")
		case u.User != nil:
			p.Add(path, "must not include credentials; use tracing.headers_env")
		case u.Port() != "" && !validPort(u.Port()):
			p.Addf(path, "port must be between 1 and 65535 (got %q)", u.Port())
		case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(*t.Endpoint, "?") || strings.HasSuffix(*t.Endpoint, "#"):
			p.Add(path, "must not include a query or fragment")
		case t.Exporter == "otlp-grpc" && u.Path != "" && u.Path != "/":
			// gRPC addresses a service, not a path: a path here is a
			// mistake (usually an HTTP endpoint given to the gRPC exporter).
			p.Add(path, `must not include a path with exporter "otlp-grpc"`)
		}
		if t.Exporter == "stdout" {
			p.Add(path, `must not be set with exporter "stdout"`)
		}
	}
	seen := map[string]string{}
	for _, name := range sortedKeys(t.HeadersEnv) {
		if strings.TrimSpace(name) != name || !headerName.MatchString(name) {
			p.Add("tracing.headers_env."+name, "invalid header name")
			continue
		}
		if other, dup := seen[strings.ToLower(name)]; dup {
			p.Addf("tracing.headers_env."+name, "duplicate header name (same as %q ignoring case)", other)
		}
		seen[strings.ToLower(name)] = name
	}
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}
