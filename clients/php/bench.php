<?php

// Measures the client's own cost per call against the bare round trip:
// php bench.php URL [CALLS] [PASSES]. The bare round trip posts a
// prepared /v1/check on one kept-alive curl handle; the client's call
// (Client::check) does the same and builds its request and Decision.
// Passes alternate; the medians are printed. The rule "api" must allow
// far more than CALLS a second.

require __DIR__ . '/src/autoload.php';

[$url, $calls, $passes] = [$argv[1], (int) ($argv[2] ?? 2000), (int) ($argv[3] ?? 7)];
$bare = function () use ($url, $calls): float {
    $h = curl_init($url . '/v1/check');
    curl_setopt_array($h, [CURLOPT_POST => true, CURLOPT_POSTFIELDS => '{"rule":"api","key":"bench","cost":1}',
        CURLOPT_HTTPHEADER => ['Content-Type: application/json', 'Expect:'], CURLOPT_RETURNTRANSFER => true]);
    $t = hrtime(true);
    for ($i = 0; $i < $calls; $i++) {
        curl_exec($h);
    }
    return (hrtime(true) - $t) / 1e3 / $calls;
};
$client = function () use ($url, $calls): float {
    $c = new Sluice\Client($url, ['timeout' => 5]);
    $c->check('api', 'bench');
    $t = hrtime(true);
    for ($i = 0; $i < $calls; $i++) {
        $c->check('api', 'bench');
    }
    return (hrtime(true) - $t) / 1e3 / $calls;
};
$b = $c = [];
for ($p = 0; $p < $passes; $p++) {
    $b[] = $bare();
    $c[] = $client();
}
$median = function (array $x): float { sort($x); return $x[intdiv(count($x), 2)]; };
[$mb, $mc] = [$median($b), $median($c)];
printf("php: round trip %.1f µs, client %.1f µs, overhead %.1f µs = %.1f%% (median of %d passes of %d calls)\n",
    $mb, $mc, $mc - $mb, ($mc - $mb) / $mb * 100, $passes, $calls);
