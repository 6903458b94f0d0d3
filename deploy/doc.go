// Package deploy holds no code: it is the home of the deployment artefacts
// (systemd unit and install scripts, the container image, Kubernetes
// manifests, the Helm chart, the Grafana dashboard and Prometheus rules) and
// of the tests that check each of them (docs/deploy.md). The Helm and
// Kubernetes modules are imported by those tests only, so the nats-sink
// binary never links them.
package deploy
