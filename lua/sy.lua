-- lua/sy.lua: the helper library every policy (and spec) sees as the global
-- `sy`. Small, pure functions over strings and lists; no state. Each policy
-- gets its own shallow copy, so reassigning sy.x in one file changes nothing
-- elsewhere. Documented in docs/policies.md.
local sy = {}

-- string.lower that accepts nil (and anything not a string) as "".
function sy.lower(s)
  if type(s) ~= "string" then return "" end
  return string.lower(s)
end

-- Plain (no patterns), ASCII case-insensitive substring test.
function sy.contains(text, needle)
  if type(text) ~= "string" or type(needle) ~= "string" then return false end
  return string.find(string.lower(text), string.lower(needle), 1, true) ~= nil
end

-- The first entry of list found in text (plain, case-insensitive), or nil.
function sy.contains_any(text, list)
  if type(text) ~= "string" then return nil end
  local low = string.lower(text)
  for _, needle in ipairs(list) do
    if string.find(low, string.lower(needle), 1, true) then return needle end
  end
  return nil
end

function sy.starts_with(s, prefix)
  return type(s) == "string" and string.sub(s, 1, #prefix) == prefix
end

function sy.clamp(x, lo, hi)
  if x < lo then return lo end
  if x > hi then return hi end
  return x
end

-- {"a", "b"} -> {a = true, b = true}
function sy.set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

function sy.copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- Appends every element of src to dst; returns dst.
function sy.append(dst, src)
  for _, v in ipairs(src) do dst[#dst + 1] = v end
  return dst
end

function sy.map(list, fn)
  local out = {}
  for i, v in ipairs(list) do out[i] = fn(v) end
  return out
end

function sy.filter(list, pred)
  local out = {}
  for _, v in ipairs(list) do
    if pred(v) then out[#out + 1] = v end
  end
  return out
end

function sy.index_of(list, value)
  for i, v in ipairs(list) do
    if v == value then return i end
  end
  return nil
end

-- Moves the first element equal to value to position 1; returns list.
function sy.move_to_front(list, value)
  local i = sy.index_of(list, value)
  if i and i > 1 then table.insert(list, 1, table.remove(list, i)) end
  return list
end

-- Deterministic pseudo-random step (the C default uses the same formula):
-- returns the next state, a non-negative integer below 2^31.
function sy.rand(state)
  return (state * 1103515245 + 12345) & 0x7fffffff
end

-- cjson.decode that returns nil (and the message) instead of raising.
function sy.json_decode(s)
  if type(s) ~= "string" then return nil, "not a string" end
  local ok, v = pcall(cjson.decode, s)
  if ok then return v end
  return nil, v
end

return sy
