-- lua/spec.lua: the assertion API and test collector of `switchyard test`
-- (the C side is src/policy/policy_test.c). A spec file calls describe/it (or test)
-- to register cases; the runner then calls M.run(i) for each one under its
-- own instruction budget. Everything in M.api becomes a global of the spec.
local M = { api = {} }
local api = M.api
local tests, prefix = {}, {}

-- ----------------------------------------------------------------- values

local function show(v, depth)
  depth = depth or 0
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) ~= "table" then return tostring(v) end
  if depth >= 3 then return "{...}" end
  local keys, parts = {}, {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "number" or type(a) == "string") then return a < b end
    return type(a) < type(b)
  end)
  local n = #v
  for i, k in ipairs(keys) do
    if i > 20 then parts[#parts + 1] = "..." break end
    local val = show(v[k], depth + 1)
    if math.type(k) == "integer" and k >= 1 and k <= n then
      parts[#parts + 1] = val
    else
      parts[#parts + 1] = tostring(k) .. "=" .. val
    end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.show = show

local function deep_eq(a, b, seen)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  for k, v in pairs(a) do
    if not deep_eq(v, b[k], seen) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end
M.deep_eq = deep_eq

local function suffix(msg)
  return msg and (" (" .. tostring(msg) .. ")") or ""
end

-- Raises msg at the spec line that called the assertion (level 3 from here).
local function fail_at(msg)
  error(msg, 3)
end

-- ------------------------------------------------------------ registering

function api.describe(name, fn)
  prefix[#prefix + 1] = tostring(name)
  local ok, err = pcall(fn)
  prefix[#prefix] = nil
  if not ok then error(err, 0) end
end

function api.it(name, fn)
  assert(type(fn) == "function", "it/test: second argument must be a function")
  local parts = sy.copy(prefix)
  parts[#parts + 1] = tostring(name)
  tests[#tests + 1] = { name = table.concat(parts, " > "), fn = fn }
end
api.test = api.it

-- ------------------------------------------------------------- assertions

function api.eq(actual, expected, msg)
  if not deep_eq(actual, expected) then
    fail_at("expected " .. show(expected) .. ", got " .. show(actual) .. suffix(msg))
  end
end

function api.neq(actual, unexpected, msg)
  if deep_eq(actual, unexpected) then
    fail_at("expected anything but " .. show(unexpected) .. suffix(msg))
  end
end

function api.is_true(v, msg)
  if v ~= true then fail_at("expected true, got " .. show(v) .. suffix(msg)) end
end

function api.is_false(v, msg)
  if v ~= false then fail_at("expected false, got " .. show(v) .. suffix(msg)) end
end

function api.is_nil(v, msg)
  if v ~= nil then fail_at("expected nil, got " .. show(v) .. suffix(msg)) end
end

function api.not_nil(v, msg)
  if v == nil then fail_at("expected a value, got nil" .. suffix(msg)) end
end

function api.ok(v, msg)
  if not v then fail_at("expected a truthy value, got " .. show(v) .. suffix(msg)) end
end

function api.near(actual, expected, eps, msg)
  eps = eps or 1e-9
  if type(actual) ~= "number" or math.abs(actual - expected) > eps then
    fail_at("expected " .. show(expected) .. " +/- " .. eps .. ", got " .. show(actual) .. suffix(msg))
  end
end

local function has(haystack, needle)
  if type(haystack) == "string" then
    return type(needle) == "string" and string.find(haystack, needle, 1, true) ~= nil
  end
  if type(haystack) == "table" then
    for _, v in pairs(haystack) do
      if deep_eq(v, needle) then return true end
    end
  end
  return false
end

function api.contains(haystack, needle, msg)
  if not has(haystack, needle) then
    fail_at(show(haystack) .. " does not contain " .. show(needle) .. suffix(msg))
  end
end

function api.fail(msg)
  fail_at(msg or "failed")
end

-- raises(fn, text?): fn must raise an error (whose message contains text).
function api.raises(fn, text)
  local ok, err = pcall(fn)
  if ok then fail_at("expected an error, none raised") end
  if text and not has(tostring(err), text) then
    fail_at("error " .. show(tostring(err)) .. " does not contain " .. show(text))
  end
end

-- expect(actual).to_be(v) and friends; each matcher returns the expectation.
function api.expect(actual)
  local e = {}
  -- Every matcher ends in `return check(...)`, a tail call, so level 2 is the spec.
  local function check(cond, what)
    if not cond then error("expected " .. show(actual) .. " " .. what, 2) end
    return e
  end
  function e.to_be(v) return check(actual == v, "to be " .. show(v)) end
  function e.not_to_be(v) return check(actual ~= v, "not to be " .. show(v)) end
  function e.to_equal(v) return check(deep_eq(actual, v), "to equal " .. show(v)) end
  function e.not_to_equal(v) return check(not deep_eq(actual, v), "not to equal " .. show(v)) end
  function e.to_be_nil() return check(actual == nil, "to be nil") end
  function e.to_be_true() return check(actual == true, "to be true") end
  function e.to_be_false() return check(actual == false, "to be false") end
  function e.to_be_truthy() return check(actual, "to be truthy") end
  function e.to_be_falsy() return check(not actual, "to be falsy") end
  function e.to_contain(v) return check(has(actual, v), "to contain " .. show(v)) end
  function e.to_have_length(n)
    return check((type(actual) == "table" or type(actual) == "string") and #actual == n, "to have length " .. n)
  end
  local function num(op, v, cmp)
    return check(type(actual) == "number" and cmp(actual, v), op .. " " .. show(v))
  end
  function e.to_be_greater_than(v) return num("to be >", v, function(a, b) return a > b end) end
  function e.to_be_at_least(v) return num("to be >=", v, function(a, b) return a >= b end) end
  function e.to_be_less_than(v) return num("to be <", v, function(a, b) return a < b end) end
  function e.to_be_at_most(v) return num("to be <=", v, function(a, b) return a <= b end) end
  function e.to_be_near(v, eps)
    return num("to be within " .. (eps or 1e-9) .. " of", v, function(a, b) return math.abs(a - b) <= (eps or 1e-9) end)
  end
  function e.to_match(pattern)
    return check(type(actual) == "string" and string.find(actual, pattern) ~= nil, "to match " .. show(pattern))
  end
  return e
end

-- ----------------------------------------------------------------- runner

function M.reset()
  tests, prefix = {}, {}
end

function M.count()
  return #tests
end

function M.name(i)
  return tests[i].name
end

-- Returns true, or false and the failure message.
function M.run(i)
  local ok, err = pcall(tests[i].fn)
  if ok then return true end
  return false, type(err) == "string" and err or show(err)
end

return M
