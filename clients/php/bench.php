<?php

// Measures the client's own cost per call against the bare round trip:
// php bench.php URL [CALLS] [PASSES]. The bare round trip is the least a
// PHP program does for a decision: a prepared POST /v1/check on one
// kept-alive curl handle, its options set once, and the answer's JSON
// decoded. The client's call is Client::check('api', 'bench'), which
// sends the same body. Each pass times CALLS of each, one after the
// other, in CPU time of the process (getrusage: user and system) and in
// wall time. The overhead of a pass is the client's CPU per call less the
// bare's; its share is that over the bare wall round trip. The medians of
// the passes are printed with their spread (min-max). The rule "api" must
// allow far more than CALLS a second (clients/testdata/bench.yaml); a
// denial stops the bench.

require __DIR__ . '/src/autoload.php';

[$url, $calls, $passes] = [$argv[1], (int) ($argv[2] ?? 2000), (int) ($argv[3] ?? 7)];
$cpu = function (): float {
    $r = getrusage();
    return $r['ru_utime.tv_sec'] + $r['ru_utime.tv_usec'] / 1e6 + $r['ru_stime.tv_sec'] + $r['ru_stime.tv_usec'] / 1e6;
};
$bare = function (int $calls) use ($url, $cpu): array {
    $h = curl_init($url . '/v1/check');
    curl_setopt_array($h, [CURLOPT_POST => true, CURLOPT_POSTFIELDS => '{"rule":"api","key":"bench","cost":1}',
        CURLOPT_HTTPHEADER => ['Content-Type: application/json', 'Expect:'], CURLOPT_RETURNTRANSFER => true]);
    $allowed = 0;
    [$c, $t] = [$cpu(), hrtime(true)];
    for ($i = 0; $i < $calls; $i++) {
        $allowed += json_decode(curl_exec($h), true)['allowed'] === true ? 1 : 0;
    }
    [$c, $t] = [$cpu() - $c, (hrtime(true) - $t) / 1e9];
    if ($allowed !== $calls) {
        fwrite(STDERR, "bench: the bare round trip was denied; raise rule api's limit\n");
        exit(1);
    }
    return [$c / $calls, $t / $calls];
};
$client = function (int $calls) use ($url, $cpu): array {
    $s = new Sluice\Client($url, ['timeout' => 5]);
    $s->check('api', 'bench');
    $allowed = 0;
    [$c, $t] = [$cpu(), hrtime(true)];
    for ($i = 0; $i < $calls; $i++) {
        $allowed += $s->check('api', 'bench')->allowed ? 1 : 0;
    }
    [$c, $t] = [$cpu() - $c, (hrtime(true) - $t) / 1e9];
    if ($allowed !== $calls) {
        fwrite(STDERR, "bench: the client was denied; raise rule api's limit\n");
        exit(1);
    }
    return [$c / $calls, $t / $calls];
};
$bare(intdiv($calls, 10) + 1); // warm up both paths
$client(intdiv($calls, 10) + 1);
$rt = $over = $share = $bc = $cc = [];
for ($p = 0; $p < $passes; $p++) {
    [$b, $c] = [$bare($calls), $client($calls)];
    $rt[] = $b[1];
    $bc[] = $b[0];
    $cc[] = $c[0];
    $over[] = $c[0] - $b[0];
    $share[] = ($c[0] - $b[0]) / $b[1];
}
$spread = function (array $x, float $scale): string {
    sort($x);
    return sprintf('%.1f (%.1f-%.1f)', $x[intdiv(count($x), 2)] * $scale, $x[0] * $scale, $x[count($x) - 1] * $scale);
};
printf("php: overhead %s µs = %s%% of the round trip %s µs; cpu per call: bare %s µs, client %s µs (median (min-max) of %d passes of %d calls)\n",
    $spread($over, 1e6), $spread($share, 100), $spread($rt, 1e6), $spread($bc, 1e6), $spread($cc, 1e6), $passes, $calls);
