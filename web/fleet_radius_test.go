package web_test

import (
	"encoding/json"
	"testing"
)

// /api/v1/fleet answers mean_max_radius, the mean of the APIs' max radius,
// and keeps mean_radius, its first name, with the same value; OpenAPI
// documents both. Over the rollout the one API's max radius is 2 (the
// naive phase, internal/fixture), so both are 2, while the API's own
// mean_radius, over its failed traces (radius 1 in the two ownership
// phases, 2 in the naive one), lies between 1 and 2.
func TestFleetMeanMaxRadius(t *testing.T) {
	st := uiStore(t)
	srv := serve(t, st, uiConfig())
	var fleet struct {
		Fleet map[string]json.RawMessage
	}
	uiGetJSON(t, srv, "/api/v1/fleet?"+uiRange(), &fleet)
	for _, k := range []string{"mean_max_radius", "mean_radius"} {
		if v := string(fleet.Fleet[k]); v != "2" {
			t.Errorf("fleet.%s = %q, want 2", k, v)
		}
	}
	var apis struct {
		APIs []struct {
			MaxRadius  int     `json:"max_radius"`
			MeanRadius float64 `json:"mean_radius"`
		}
	}
	uiGetJSON(t, srv, "/api/v1/apis?"+uiRange(), &apis)
	if len(apis.APIs) != 1 || apis.APIs[0].MaxRadius != 2 || !(apis.APIs[0].MeanRadius > 1 && apis.APIs[0].MeanRadius < 2) {
		t.Errorf("apis %+v: want one, max radius 2, mean radius strictly between 1 and 2", apis.APIs)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				Fleet struct {
					Properties struct {
						Fleet struct {
							Properties map[string]struct{ Type string }
						}
					}
				}
			}
		}
	}
	uiGetJSON(t, srv, "/api/v1/openapi.json", &doc)
	props := doc.Components.Schemas.Fleet.Properties.Fleet.Properties
	for _, k := range []string{"max_radius", "mean_max_radius", "mean_radius", "failed_apis"} {
		if props[k].Type == "" {
			t.Errorf("the OpenAPI Fleet schema lacks fleet.%s: %v", k, props)
		}
	}
}
