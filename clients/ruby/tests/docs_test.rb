# frozen_string_literal: true

require "open3"
require "tempfile"

# Runs the snippets of docs/ruby.md, each in a Ruby process of its own,
# against a sluice serve of the page's own rules; a text block after a
# snippet is what it must print. The config.ru snippet is then driven
# with Rack::MockRequest.
class DocsTest < Minitest::Test
  PAGE = File.expand_path("../../../docs/ruby.md", __dir__)
  LIB = File.expand_path("../lib", __dir__)

  def test_ruby_md
    blocks = File.read(PAGE).scan(/^```(\w+)\n(.*?)^```\n/m)
    yaml = blocks.select { |lang, _| lang == "yaml" }
    assert_equal 1, yaml.size, "one yaml block"
    config = Tempfile.new(%w[sluice .yaml])
    config.write(yaml[0][1])
    config.close
    server = Support::Server.new(config.path)
    ran = 0
    blocks.each_with_index do |(lang, text), i|
      next unless lang == "ruby"

      code = text.gsub("http://127.0.0.1:8080", server.url)
      if code.start_with?("# config.ru")
        rack_app(code)
      else
        out, err, status = Open3.capture3(RbConfig.ruby, "-I#{LIB}", "-e", code)
        assert status.success?, "snippet #{i}: #{err}"
        assert_equal blocks[i + 1][1], out, "what snippet #{i} prints" if blocks[i + 1]&.first == "text"
      end
      ran += 1
    end
    assert_operator ran, :>=, 3
  ensure
    server&.stop
    config&.unlink
  end

  def rack_app(code)
    app = Rack::Builder.new_from_string(code)
    got = 6.times.map do
      Rack::MockRequest.new(app).post("/login", params: { "username" => "alice", "password" => "guess" },
                                                "REMOTE_ADDR" => "198.51.100.1").status
    end
    assert_equal [401] * 5 + [429], got
    resp = Rack::MockRequest.new(app).get("/api/items", "HTTP_X_API_KEY" => "k")
    assert_includes resp.headers["ratelimit-policy"], '"api";q=100'
  end
end
