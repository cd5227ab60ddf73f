<?php

declare(strict_types=1);

// Runs the snippets of docs/php.md, each in a PHP process of its own,
// against a sluice serve of the page's own rules; a text block after a
// snippet is what it must print.

function test_docs(): void
{
    $page = file_get_contents(__DIR__ . '/../../../docs/php.md');
    preg_match_all('/^```(\w+)\n(.*?)^```\n/sm', $page, $m, PREG_SET_ORDER);
    $yaml = array_values(array_filter($m, fn ($b) => $b[1] === 'yaml'));
    assert_same(1, count($yaml), 'one yaml block');
    $config = tempnam(sys_get_temp_dir(), 'sluice') . '.yaml';
    file_put_contents($config, $yaml[0][2]);
    Cleanup::add(fn () => unlink($config));
    $s = new Server($config);
    $prelude = "<?php require '" . __DIR__ . "/../src/autoload.php'; require '" . NYHOLM . "'; ?>";
    $ran = 0;
    foreach ($m as $i => [, $lang, $text]) {
        if ($lang !== 'php') {
            continue;
        }
        $file = tempnam(sys_get_temp_dir(), 'snippet');
        file_put_contents($file, $prelude . str_replace('http://127.0.0.1:8080', $s->url, $text));
        $p = proc_open([PHP_BINARY, '-d', 'display_errors=stderr', $file], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        $code = proc_close($p);
        unlink($file);
        assert_same(0, $code, "snippet $i exits 0 (stderr: $err)");
        if (isset($m[$i + 1]) && $m[$i + 1][1] === 'text') {
            assert_same($m[$i + 1][2], $out, "what snippet $i prints");
        }
        $ran++;
    }
    assert_true($ran >= 4, "ran $ran snippets");
}
