// main asks a sluice serve, through a client generated from its OpenAPI
// description (schema.d.ts, by openapi-typescript) and openapi-fetch,
// what its tests expect of a configuration with one rule, login, of
// 2/min; it prints what was wrong and exits 1 on a wrong answer.
//
//	node out/main.js http://127.0.0.1:8080
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

// Node's process, declared here so that the client needs no @types/node.
declare const process: { argv: string[]; exitCode?: number };

type CheckResponse = components["schemas"]["CheckResponse"];

const failures: string[] = [];

// expect records a failure unless ok.
function expect(ok: boolean, what: string): void {
  if (!ok) {
    failures.push(what);
  }
}

// check asks one check of login for key, and returns its answer.
async function check(
  api: ReturnType<typeof createClient<paths>>,
  key: string,
): Promise<CheckResponse | undefined> {
  const { data, response } = await api.POST("/v1/check", {
    body: { rule: "login", key },
  });
  expect(response.status === 200, `check ${key}: status ${response.status}, want 200`);
  if (data === undefined || "results" in data) {
    expect(false, `check ${key}: ${JSON.stringify(data)}, want a CheckResponse`);
    return undefined;
  }
  return data;
}

// limits spends login's 2/min for key, is denied, resets and is allowed.
async function limits(api: ReturnType<typeof createClient<paths>>, key: string): Promise<void> {
  for (const remaining of [1, 0]) {
    const d = await check(api, key);
    expect(d?.allowed === true && d.remaining === remaining && d.policy === "2/min",
      `take: ${JSON.stringify(d)}, want allowed with ${remaining} remaining of 2/min`);
  }
  const denied = await check(api, key);
  expect(denied?.allowed === false && denied.retry_after > 0,
    `over the limit: ${JSON.stringify(denied)}, want denied with a retry_after`);
  const { response } = await api.POST("/v1/reset", { body: { rule: "login", key } });
  expect(response.status === 204, `reset: status ${response.status}, want 204`);
  const again = await check(api, key);
  expect(again?.allowed === true && again.remaining === 1,
    `after reset: ${JSON.stringify(again)}, want allowed with 1 remaining`);
}

// errors asks a batch with a wrong check, and a wrong check alone.
async function errors(api: ReturnType<typeof createClient<paths>>): Promise<void> {
  const batch = await api.POST("/v1/check", {
    body: { checks: [{ rule: "login", key: `batch-${Date.now()}` }, { rule: "nope", key: "batch" }] },
  });
  const results = batch.data !== undefined && "results" in batch.data ? batch.data.results : [];
  expect(results.length === 2 && results[0]?.allowed === true && (results[1]?.error ?? "").includes("unknown rule"),
    `batch: ${JSON.stringify(batch.data)}, want an allowed check and an unknown rule`);

  const { error, response } = await api.POST("/v1/check", { body: { rule: "nope", key: "k" } });
  expect(response.status === 400 && error?.status === 400 && error.error.includes("unknown rule"),
    `unknown rule: ${response.status} ${JSON.stringify(error)}, want 400 and a problem naming it`);

  const health = await api.GET("/healthz");
  expect(health.data?.status === "ok", `healthz: ${JSON.stringify(health.data)}, want ok`);
}

async function main(): Promise<void> {
  const baseUrl = process.argv[2];
  if (baseUrl === undefined) {
    throw new Error("usage: node out/main.js URL");
  }
  const api = createClient<paths>({ baseUrl });
  await limits(api, `ts-${Date.now()}`);
  await errors(api);
  for (const f of failures) {
    console.error(f);
  }
  process.exitCode = failures.length === 0 ? 0 : 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
