package deploy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/sinks/builtin"
)

// serviceMonitor mirrors the fields of the Prometheus Operator's
// monitoring.coreos.com/v1 ServiceMonitor that the manifests use; strict
// decoding rejects anything else.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// scaledObject mirrors the fields of KEDA's keda.sh/v1alpha1 ScaledObject
// that the manifests use.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		Advanced        *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior"`
			} `json:"horizontalPodAutoscalerConfig"`
		} `json:"advanced"`
		Triggers []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// kedaJetStreamKeys are the metadata keys of KEDA's nats-jetstream scaler.
var kedaJetStreamKeys = map[string]bool{
	"natsServerMonitoringEndpoint": true, "account": true, "stream": true, "consumer": true,
	"lagThreshold": true, "activationLagThreshold": true, "useHttps": true,
}

// objects are the decoded manifests of one deployment.
type objects struct {
	deployments     []appsv1.Deployment
	configMaps      []corev1.ConfigMap
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	pdbs            []policyv1.PodDisruptionBudget
	serviceMonitors []serviceMonitor
	scaledObjects   []scaledObject
}

// strict decodes doc into v: duplicate keys, unknown fields and wrong types
// are errors.
func strict(t *testing.T, where string, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

// decodeAll splits YAML streams into documents and decodes each strictly
// into its Kubernetes type (or the local mirror of a CRD).
func decodeAll(t *testing.T, files map[string]string) objects {
	t.Helper()
	var o objects
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, doc := range strings.Split("\n"+files[name], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			where := fmt.Sprintf("%s#%d", name, i)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			b := []byte(doc)
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				var v appsv1.Deployment
				strict(t, where, b, &v)
				o.deployments = append(o.deployments, v)
			case "v1 ConfigMap":
				var v corev1.ConfigMap
				strict(t, where, b, &v)
				o.configMaps = append(o.configMaps, v)
			case "v1 Service":
				var v corev1.Service
				strict(t, where, b, &v)
				o.services = append(o.services, v)
			case "v1 ServiceAccount":
				var v corev1.ServiceAccount
				strict(t, where, b, &v)
				o.serviceAccounts = append(o.serviceAccounts, v)
			case "policy/v1 PodDisruptionBudget":
				var v policyv1.PodDisruptionBudget
				strict(t, where, b, &v)
				o.pdbs = append(o.pdbs, v)
			case "monitoring.coreos.com/v1 ServiceMonitor":
				var v serviceMonitor
				strict(t, where, b, &v)
				o.serviceMonitors = append(o.serviceMonitors, v)
			case "keda.sh/v1alpha1 ScaledObject":
				var v scaledObject
				strict(t, where, b, &v)
				o.scaledObjects = append(o.scaledObjects, v)
			default:
				t.Errorf("%s: unexpected object %s %s", where, tm.APIVersion, tm.Kind)
			}
		}
	}
	return o
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func selects(t *testing.T, what string, sel *metav1.LabelSelector, set map[string]string) {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		t.Errorf("%s: empty selector selects everything", what)
		return
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !s.Matches(labels.Set(set)) {
		t.Errorf("%s: selector %s does not match the pod labels %v", what, s, set)
	}
}

// expect is what the checks need beyond the objects themselves.
type expect struct {
	serviceMonitor, scaledObject bool
	// shutdownTimeoutMS applies when no ConfigMap is rendered (an existing
	// one is used).
	shutdownTimeoutMS int
}

// checkDeployment checks the invariants every rendering must keep, and
// returns the configuration it found (nil without a ConfigMap).
func checkDeployment(t *testing.T, o objects, want expect) *config.Config {
	t.Helper()
	if len(o.deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(o.deployments))
	}
	d := o.deployments[0]
	pod := d.Spec.Template
	selects(t, "Deployment", d.Spec.Selector, pod.Labels)
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]

	// Security.
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Error("container has no securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop [ALL] and nothing added", sc.Capabilities)
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged container")
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token it does not need")
	}

	// Resources.
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	// Probes on the metrics port.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	probe := func(name string, p *corev1.Probe, path string) int32 {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("%s probe %+v, want HTTP GET %s", name, p, path)
			return 0
		}
		port, ok := ports[p.HTTPGet.Port.String()]
		if !ok {
			t.Errorf("%s probe port %q is not a container port (%v)", name, p.HTTPGet.Port.String(), ports)
		}
		return port
	}
	metricsPort := probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	// The configuration: mounted where args point, from the ConfigMap.
	if strings.Join(c.Args, " ") != "run /etc/nats-sink/config.json" {
		t.Errorf("args %q", c.Args)
	}
	var cmName string
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	var cfg *config.Config
	shutdownMS := want.shutdownTimeoutMS
	if len(o.configMaps) > 0 {
		if len(o.configMaps) != 1 || o.configMaps[0].Name != cmName {
			t.Fatalf("ConfigMaps %d (first %q), want one named %q as the pod mounts", len(o.configMaps), o.configMaps[0].Name, cmName)
		}
		doc := o.configMaps[0].Data["config.json"]
		env := map[string]bool{}
		for _, e := range c.Env {
			if e.Value != "" {
				t.Errorf("env %s has a literal value; credentials come from Secrets", e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				env[e.Name] = true
			}
		}
		for _, name := range envKeys(t, []byte(doc)) {
			if !env[name] {
				t.Errorf("the configuration reads %s, which the Deployment does not fill from a Secret", name)
			}
		}
		lookup := func(name string) (string, bool) {
			if env[name] {
				return "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=", true // 32 bytes, base64
			}
			return "", false
		}
		var err error
		cfg, err = config.Parse([]byte(doc), "config.json", builtin.Registry(), lookup)
		if err != nil {
			t.Fatalf("the ConfigMap's config.json does not load: %v", err)
		}
		shutdownMS = cfg.Delivery.ShutdownTimeoutMS
		if cfg.Metrics.Listen == nil || !cfg.Metrics.Enabled {
			t.Error("metrics disabled or not listening: the probes would fail")
		} else {
			_, port, _ := net.SplitHostPort(*cfg.Metrics.Listen)
			if port != strconv.Itoa(int(metricsPort)) {
				t.Errorf("metrics.listen %s, probes on port %d", *cfg.Metrics.Listen, metricsPort)
			}
		}
		if cfg.ConsumerManagement.Mode == "reconcile" {
			t.Error(`consumer_management.mode "reconcile" in a fleet makes replicas rewrite the consumer in turns (docs/scaling.md)`)
		}
	}

	// The grace period covers the drain and the 5 s close.
	grace := pod.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Error("terminationGracePeriodSeconds unset")
	} else if *grace < int64(shutdownMS/1000+5) {
		t.Errorf("terminationGracePeriodSeconds %d, want at least shutdown_timeout_ms/1000 + 5 = %d", *grace, shutdownMS/1000+5)
	}

	// The metrics Service and the ServiceMonitor.
	if len(o.services) != 1 {
		t.Fatalf("%d Services, want 1", len(o.services))
	}
	svc := o.services[0]
	selects(t, "Service", &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, pod.Labels)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service ports %+v, want one targeting the container port metrics", svc.Spec.Ports)
	}
	if len(o.pdbs) != 1 {
		t.Errorf("%d PodDisruptionBudgets, want 1", len(o.pdbs))
	} else {
		selects(t, "PodDisruptionBudget", o.pdbs[0].Spec.Selector, pod.Labels)
	}
	if len(o.serviceAccounts) == 1 && o.serviceAccounts[0].Name != pod.Spec.ServiceAccountName {
		t.Errorf("ServiceAccount %q, pod uses %q", o.serviceAccounts[0].Name, pod.Spec.ServiceAccountName)
	}
	if got := len(o.serviceMonitors) == 1; got != want.serviceMonitor {
		t.Errorf("ServiceMonitor rendered = %v, want %v", got, want.serviceMonitor)
	}
	for _, sm := range o.serviceMonitors {
		selects(t, "ServiceMonitor", &sm.Spec.Selector, svc.Labels)
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
		}
	}

	// Scale-out limits (docs/scaling.md, "Capacity rule").
	if got := len(o.scaledObjects) == 1; got != want.scaledObject {
		t.Errorf("ScaledObject rendered = %v, want %v", got, want.scaledObject)
	}
	maxReplicas := int32(0)
	if d.Spec.Replicas != nil {
		maxReplicas = *d.Spec.Replicas
	}
	for _, so := range o.scaledObjects {
		if so.Spec.ScaleTargetRef.Name != d.Name {
			t.Errorf("ScaledObject targets %q, the Deployment is %q", so.Spec.ScaleTargetRef.Name, d.Name)
		}
		if so.Spec.MinReplicaCount == nil || so.Spec.MaxReplicaCount == nil || *so.Spec.MinReplicaCount < 1 || *so.Spec.MinReplicaCount > *so.Spec.MaxReplicaCount {
			t.Errorf("ScaledObject replicas %v..%v", so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
			continue
		}
		maxReplicas = max(maxReplicas, *so.Spec.MaxReplicaCount)
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" {
			t.Fatalf("ScaledObject triggers %+v, want one nats-jetstream", so.Spec.Triggers)
		}
		md := so.Spec.Triggers[0].Metadata
		for k := range md {
			if !kedaJetStreamKeys[k] {
				t.Errorf("nats-jetstream trigger: unknown metadata key %q", k)
			}
		}
		for _, k := range []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold"} {
			if md[k] == "" {
				t.Errorf("nats-jetstream trigger: %s missing", k)
			}
		}
		if n, err := strconv.Atoi(md["lagThreshold"]); err != nil || n < 1 {
			t.Errorf("lagThreshold %q, want a positive integer", md["lagThreshold"])
		}
		if cfg != nil && (md["stream"] != cfg.NATS.Stream || md["consumer"] != cfg.NATS.Consumer) {
			t.Errorf("trigger watches %s/%s, the pipeline consumes %s/%s", md["stream"], md["consumer"], cfg.NATS.Stream, cfg.NATS.Consumer)
		}
	}
	if cfg != nil && maxReplicas > 0 {
		perReplica := cfg.Delivery.MaxInFlightBatches * cfg.Delivery.BatchSize
		cm := cfg.ConsumerManagement
		if cm.MaxAckPending == nil || int(maxReplicas)*perReplica > *cm.MaxAckPending {
			t.Errorf("%d replicas x %d in flight exceed max_ack_pending %v", maxReplicas, perReplica, cm.MaxAckPending)
		}
		if cm.MaxWaiting == nil || *cm.MaxWaiting < int(maxReplicas) {
			t.Errorf("max_waiting %v below %d replicas", cm.MaxWaiting, maxReplicas)
		}
	}
	return cfg
}

// envKeys returns the values of every "*_env" key in a configuration
// document: the variables it reads secrets from.
func envKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	var tree any
	if err := json.Unmarshal(doc, &tree); err != nil {
		t.Fatalf("config.json: %v", err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && strings.HasSuffix(k, "_env") {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(tree)
	sort.Strings(out)
	return out
}

// TestKubernetesManifests decodes every plain manifest strictly and checks
// the invariants.
func TestKubernetesManifests(t *testing.T) {
	files := map[string]string{}
	paths, _ := filepath.Glob("kubernetes/*.yaml")
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(b)
	}
	o := decodeAll(t, files)
	cfg := checkDeployment(t, o, expect{serviceMonitor: true, scaledObject: true})
	if cfg == nil || cfg.Sink.Type != "postgres" {
		t.Errorf("the example should run a shared destination (postgres)")
	}
	// The kustomization lists every manifest.
	k, err := os.ReadFile("kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kz struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	strict(t, "kustomization.yaml", k, &kz)
	if len(kz.Resources) != len(files) {
		t.Errorf("kustomization lists %d resources, there are %d manifests", len(kz.Resources), len(files))
	}
}

const chartDir = "helm/nats-sink"

// renderChart renders the chart with vals as Helm install would, after
// linting it.
func renderChart(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "orders", Namespace: "sinks", IsInstall: true}, nil)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	manifests := map[string]string{}
	for name, body := range out {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(body) != "" {
			manifests[name] = body
		}
	}
	if notes := out["nats-sink/templates/NOTES.txt"]; !strings.Contains(notes, "rollout status deployment/orders-nats-sink") {
		t.Errorf("NOTES.txt:\n%s", notes)
	}
	return manifests, nil
}

func lintChart(t *testing.T, vals map[string]any) {
	t.Helper()
	l := lint.All(chartDir, vals, "sinks", false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %v", m)
		}
	}
}

func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

// TestHelmChart lints and renders the chart with Helm's own packages for
// the default values and two more sets, decodes every object strictly, and
// checks the invariants; values that break the capacity rule or the grace
// period must not render.
func TestHelmChart(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values string
		want   expect
		check  func(t *testing.T, o objects)
	}{
		{name: "defaults", want: expect{}, check: func(t *testing.T, o objects) {
			if r := o.deployments[0].Spec.Replicas; r == nil || *r != 2 {
				t.Errorf("replicas %v, want 2", r)
			}
		}},
		{name: "postgres with KEDA and a ServiceMonitor", values: `
config:
  inline:
    nats: {url: "nats://nats:4222", stream: ORDERS, consumer: orders-pg, subject: "orders.>",
           user: sink, password_env: NATS_PASSWORD}
    consumer_management: {mode: bind_only, max_ack_pending: 40000, max_waiting: 32}
    delivery: {batch_size: 1000, max_in_flight_batches: 4, shutdown_timeout_ms: 45000}
    metrics: {enabled: true, listen: "0.0.0.0:9500"}
    sink: {type: postgres, host: pg, database: events, user: sink, password_env: PG_PASSWORD,
           table: events}
metricsPort: 9500
secrets:
  env:
    - {name: NATS_PASSWORD, secretName: creds, key: nats}
    - {name: PG_PASSWORD, secretName: creds, key: pg}
  files:
    - {name: pg-ca, secretName: pg-ca, mountPath: /etc/nats-sink/pg-ca}
keda: {enabled: true, maxReplicaCount: 10, lagThreshold: "20000"}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
`, want: expect{serviceMonitor: true, scaledObject: true}, check: func(t *testing.T, o objects) {
			d := o.deployments[0]
			if d.Spec.Replicas != nil {
				t.Errorf("replicas %d set while KEDA owns the count", *d.Spec.Replicas)
			}
			if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 55 {
				t.Errorf("grace period %d, want 45 + 10", g)
			}
			if md := o.scaledObjects[0].Spec.Triggers[0].Metadata; md["stream"] != "ORDERS" || md["consumer"] != "orders-pg" {
				t.Errorf("trigger %v", md)
			}
		}},
		{name: "existing ConfigMap", values: `
config: {existingConfigMap: my-sink-config}
shutdownTimeoutMs: 60000
keda: {enabled: true, stream: AUDIT, consumer: audit-s3, maxReplicaCount: 4}
podDisruptionBudget: {enabled: true, maxUnavailable: 1}
`, want: expect{scaledObject: true, shutdownTimeoutMS: 60000}, check: func(t *testing.T, o objects) {
			if len(o.configMaps) != 0 {
				t.Error("a ConfigMap was rendered although an existing one is named")
			}
			if v := o.deployments[0].Spec.Template.Spec.Volumes[0].ConfigMap; v == nil || v.Name != "my-sink-config" {
				t.Errorf("config volume %+v, want ConfigMap my-sink-config", v)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vals := values(t, tt.values)
			lintChart(t, vals)
			files, err := renderChart(t, vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			o := decodeAll(t, files)
			checkDeployment(t, o, tt.want)
			tt.check(t, o)
		})
	}

	for _, tt := range []struct{ name, values, want string }{
		{"more replicas than max_ack_pending allows", "keda: {enabled: true, maxReplicaCount: 11}", "Capacity rule"},
		{"grace period below the drain", "terminationGracePeriodSeconds: 20", "would kill the drain"},
	} {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			_, err := renderChart(t, values(t, tt.values))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("render error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
